"""`dlm.rows.build.check_inputs`: every document-level input, checked before any model
work, each problem named at its `path:line:col`."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlm.doc import load_document
from dlm.errors import BaseModelError, SourceError
from dlm.rows.build import check_inputs

DLM_ID = "01JDCACHE00000000000000000"


def doc_with(tmp_path: Path, base_model: str = "smollm2-135m", sources: str = "") -> Path:
    path = tmp_path / "doc.dlm"
    path.write_text(f"---\ndlm_id: {DLM_ID}\nbase_model: {base_model}\ntraining:\n  sources:\n{sources}---\n\nprose\n")
    return path


def test_good_inputs_pass_and_nothing_is_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "src").mkdir()
    check_inputs(load_document(doc_with(tmp_path, sources="    - path: src\n")))
    assert not any(Path(__import__("os").environ["DLM_HOME"]).glob("models/*"))


@pytest.mark.parametrize(
    ("sources", "needle", "where"),
    [
        ("    - path: missing\n", "does not exist", ":6:13"),
        ("    - path: a-file\n", "is not a folder", ":6:13"),
        ("    - path: src\n    - path: src\n      exclude: ['../x']\n", "'..' segment", ":7:13"),
    ],
)
def test_a_bad_source_is_named_at_its_line(tmp_path: Path, sources: str, needle: str, where: str):
    (tmp_path / "src").mkdir()
    (tmp_path / "a-file").write_text("x")
    path = doc_with(tmp_path, sources=sources)
    with pytest.raises(SourceError, match=needle) as err:
        check_inputs(load_document(path))
    assert str(err.value).startswith(f"{path}{where}: training.sources[")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("smollm2-13m", "did you mean 'smollm2-135m'"),
        ("./no-model", "no config.json"),
        ("nobody-has/this-model-dlm-test", "not in the local Hugging Face cache"),
    ],
)
def test_a_bad_base_model_is_named_at_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spec: str, needle: str):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (tmp_path / "src").mkdir()
    path = doc_with(tmp_path, base_model=spec, sources="    - path: src\n")
    with pytest.raises(BaseModelError, match=needle) as err:
        check_inputs(load_document(path))
    assert str(err.value).startswith(f"{path}:3:13: base_model ")

"""The train recipe's own contracts: the run file that carries options to the ranks,
the rank entry point's refusals, the manifest the store records, warnings on rows."""

import json
from pathlib import Path

import pytest

from dlm.actions.training.rank import main as rank_main
from dlm.actions.training.ranks import read_run_file, write_run_file
from dlm.actions.training.types import TrainOptions
from dlm.errors import TrainingError
from dlm.lock import LockMode
from dlm.store import open_store


@pytest.mark.parametrize(
    "options",
    [
        TrainOptions(),
        TrainOptions(
            max_steps=7,
            use_cache=False,
            strict_sources=True,
            lock_mode=LockMode.STRICT,
            cache_remote="s3://bucket/prefix",
            judge=False,
        ),
        *[TrainOptions(lock_mode=mode) for mode in LockMode],
    ],
)
def test_options_travel_to_the_ranks_unchanged(tmp_path: Path, options: TrainOptions) -> None:
    doc = tmp_path / "doc.dlm"
    doc.write_text("x")
    write_run_file(tmp_path / "run.json", doc, options)
    document, back = read_run_file(tmp_path / "run.json")
    assert back == options
    assert document == doc.resolve()
    # plain JSON: no flag spelling, no pickles
    assert json.loads((tmp_path / "run.json").read_text())["options"]["lock_mode"] == (
        options.lock_mode.value if options.lock_mode else None
    )


@pytest.mark.parametrize("content", ["", "{}", '{"document": "x"}', "[1]", '{"document": "x", "options": 3}'])
def test_a_bad_run_file_is_one_line_naming_it(tmp_path: Path, content: str) -> None:
    path = tmp_path / "run.json"
    path.write_text(content)
    with pytest.raises(TrainingError, match=r"run\.json: not a dlm rank run file"):
        read_run_file(path)


def test_the_rank_entry_point_refuses_without_a_run_file(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert rank_main([]) == 2
    assert "RUN_FILE" in capsys.readouterr().err
    assert rank_main([str(tmp_path / "missing.json")]) == 1
    assert "missing.json: not a dlm rank run file" in capsys.readouterr().err


def test_the_store_records_each_published_adapter(tmp_path: Path) -> None:
    store = open_store("01JD7Z8K2M4N6P8Q0R2S4T6V8W")
    store.root.mkdir(parents=True)
    for version, sha in (("v0001", "a" * 64), ("v0002", "b" * 64)):
        store.record_adapter(
            version=version,
            run_id=f"run-{version}",
            adapter_sha256=sha,
            base_model="m",
            base_model_revision="r",
            document_path=tmp_path / "doc.dlm",
        )
    manifest = store.read_manifest()
    assert manifest["current_version"] == "v0002"
    assert [a["adapter_sha256"] for a in manifest["adapters"]] == ["a" * 64, "b" * 64]
    assert manifest["document_path"] == str((tmp_path / "doc.dlm").resolve())
    assert manifest["base_model"] == {"name": "m", "revision": "r"}

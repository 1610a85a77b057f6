"""Bad input through the real CLI: one line naming where and the way out, exit 1,
and the store untouched."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.cli.main import app
from dlm.store import open_store

DLM_ID = "01JD7Z8K2M4N6P8Q0R2S4T6V8W"
runner = CliRunner()


def write_doc(tmp_path: Path, frontmatter: str, body: str = "# Notes\n\nSome prose.\n") -> Path:
    path = tmp_path / "doc.dlm"
    path.write_text(f"---\ndlm_id: {DLM_ID}\n{frontmatter}---\n\n{body}")
    return path


def run_fails(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1, result.stderr  # progress bars may precede it, nothing follows it
    assert result.stderr.rstrip().endswith(lines[0]) and "Traceback" not in result.output
    return lines[0]


def assert_store_untouched() -> None:
    store = open_store(DLM_ID)
    assert store.versions() == [] and not store.manifest_path.exists() and not store.lock_path.exists()


def test_malformed_yaml(tmp_path: Path):
    doc = write_doc(tmp_path, "training: [unclosed\n")
    line = run_fails(["train", str(doc)])
    assert f"{doc}:4:1: invalid YAML" in line and "line 3" in line
    assert_store_untouched()


def test_unknown_key_names_key_and_line(tmp_path: Path):
    doc = write_doc(tmp_path, "training:\n  lora_rank: 4\n")
    line = run_fails(["train", str(doc)])
    assert f"{doc}:4:" in line and "lora_rank" in line and "lora_r" in line
    assert_store_untouched()


def test_missing_base_model_folder(tmp_path: Path):
    doc = write_doc(tmp_path, "base_model: ./no-such-model\n")
    line = run_fails(["train", str(doc)])
    assert "no-such-model" in line and "config.json" in line
    assert_store_untouched()


def test_sources_path_missing(tmp_path: Path, smollm2_ref):
    doc = write_doc(tmp_path, "training:\n  sources:\n    - path: nowhere\n")
    line = run_fails(["train", str(doc)])
    assert "training.sources[0].path" in line and "nowhere does not exist" in line
    assert_store_untouched()


def test_source_escaping_through_dotdot_pattern(tmp_path: Path, smollm2_ref):
    (tmp_path / "src").mkdir()
    doc = write_doc(tmp_path, "training:\n  sources:\n    - path: src\n      include: ['../**']\n")
    line = run_fails(["train", str(doc)])
    assert "training.sources[0].include" in line and "'..'" in line
    assert_store_untouched()


def test_source_escaping_through_symlink_strict(tmp_path: Path, smollm2_ref):
    (tmp_path / "src").mkdir()
    (tmp_path / "secret.py").write_text("KEY = 1\n")
    (tmp_path / "src" / "leak.py").symlink_to(tmp_path / "secret.py")
    doc = write_doc(tmp_path, "training:\n  sources:\n    - path: src\n")
    line = run_fails(["train", str(doc), "--strict"])
    assert "leak.py is a symlink" in line and "outside the source root" in line
    assert_store_untouched()


@pytest.mark.parametrize("cache", ["--no-cache", None])
def test_corpus_of_binary_files_has_no_usable_rows(tmp_path: Path, smollm2_ref, cache):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.bin").write_bytes(b"\x00\x01\x02")
    (tmp_path / "src" / "b.dat").write_bytes(b"PK\x00\x00")
    doc = write_doc(tmp_path, "training:\n  sources:\n    - path: src\n", body="")
    line = run_fails(["train", str(doc)] + ([cache] if cache else []))
    assert "no usable training rows" in line and "skipped: 2 binary" in line
    assert_store_untouched()


def test_missing_document_says_how_to_create_one(tmp_path: Path):
    line = run_fails(["show", str(tmp_path / "absent.dlm")])
    assert "dlm init" in line


def test_conflicting_lock_flags_are_a_usage_error(tmp_path: Path):
    doc = write_doc(tmp_path, "")
    result = runner.invoke(app, ["train", str(doc), "--update-lock", "--ignore-lock"])
    assert result.exit_code == 2
    assert_store_untouched()


def test_init_then_show_json(tmp_path: Path):
    import json

    path = tmp_path / "new.dlm"
    src = tmp_path / "code"
    src.mkdir()
    (src / "m.py").write_text("x = 1\n")
    result = runner.invoke(app, ["init", str(path), "--source", str(src)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["show", str(path), "--json"])
    assert result.exit_code == 0, result.output
    view = json.loads(result.stdout)
    assert view["rows"] == {
        "prose": 1,
        "instruction": 1,
        "source_files": 1,
        "synth_pairs": 0,
        "synth_probes": 0,
        "synth_by_source": {},
        "teacher_pairs": 0,
        "teacher_unasked": 0,
    }
    assert view["adapter"] == {"current": None, "versions": []}
    again = runner.invoke(app, ["init", str(path)])
    assert again.exit_code == 1 and "--force" in again.stderr

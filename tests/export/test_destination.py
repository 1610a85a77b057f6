"""`--out`: an export replaces only a folder it wrote itself, and never the document's
folder, the working folder or the store, whatever `--force` says."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.cli.main import app
from dlm.errors import ExportError
from dlm.export.publish import staged_folder

MARKER = ".dlm-export"
PEFT_FILES = (
    "adapter_config.json",
    "adapter_model.safetensors",
    "chat_template.jinja",
    "tokenizer.json",
    "tokenizer_config.json",
)

pytestmark = pytest.mark.integration


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


@pytest.fixture
def project(doc: Path) -> Path:
    """The document's folder as a user has it: the document, a source tree, an unrelated file."""
    (doc.parent / "src").mkdir()
    (doc.parent / "src" / "users.py").write_text("ITER_CHUNK_SIZE = 512\n")
    (doc.parent / "notes.txt").write_text("keep me\n")
    return doc.parent


@pytest.mark.parametrize("force", [False, True])
@pytest.mark.parametrize("out", [".", "PWD", ".."])
def test_out_holding_the_working_folder_or_document_deletes_nothing(doc, project, monkeypatch, out, force):
    monkeypatch.chdir(project)
    before = _tree(project.parent)
    target = str(project) if out == "PWD" else out
    args = ["export", doc.name, "--format", "peft", "--out", target] + (["--force"] if force else [])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    (line,) = _lines(result.output)
    assert "must never replace" in line
    assert _tree(project.parent) == before
    assert sorted(p.name for p in project.iterdir()) == ["notes.dlm", "notes.txt", "src"]


def test_a_folder_dlm_did_not_write_is_refused_unless_force(doc, tmp_path):
    other = tmp_path / "mine"
    other.mkdir()
    (other / "thesis.tex").write_text("years of work")
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(doc), "--format", "peft", "--out", str(other)])
    assert result.exit_code == 1
    (line,) = _lines(result.output)
    assert "not written by dlm export" in line and "--force" in line
    assert (other / "thesis.tex").read_text() == "years of work"
    result = runner.invoke(app, ["export", str(doc), "--format", "peft", "--out", str(other), "--force"])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in other.iterdir()) == [MARKER, *PEFT_FILES]


def test_an_earlier_export_is_replaced_but_not_one_the_user_added_files_to(doc, tmp_path):
    out = tmp_path / "exp"
    runner = CliRunner()
    for _ in range(2):
        result = runner.invoke(app, ["export", str(doc), "--format", "peft", "--out", str(out)])
        assert result.exit_code == 0, result.output
    marker = json.loads((out / MARKER).read_text())
    assert marker["files"] == list(PEFT_FILES)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc", "exp"]  # no staging or .old folder left
    (out / "README.md").write_text("my notes on this export")
    result = runner.invoke(app, ["export", str(doc), "--format", "peft", "--out", str(out)])
    assert result.exit_code == 1 and "README.md" in result.output
    assert (out / "README.md").exists()


def test_an_empty_folder_is_written(doc, tmp_path):
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(tmp_path / "empty")])
    assert result.exit_code == 0, result.output


def test_the_store_is_never_an_export_folder(doc, dlm_home, adapter_dir):
    before = _tree(dlm_home)
    for target in (adapter_dir, dlm_home / "store"):
        result = CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(target), "--force"])
        assert result.exit_code == 1 and "must never replace" in result.output
    assert _tree(dlm_home) == before


def test_a_full_disk_is_one_line_that_never_names_the_staging_folder(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ExportError) as info:
        with staged_folder(out) as staging:
            (staging / "model.safetensors").write_bytes(b"x")
            raise OSError(errno.ENOSPC, "No space left on device", str(staging / "model.safetensors"))
    message = str(info.value)
    assert message.startswith(f"{out}: no space left") and "staging" not in message and "\n" not in message
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_wrapped_by_a_library_is_the_same_line(tmp_path):
    from safetensors import SafetensorError

    out = tmp_path / "out"
    with pytest.raises(ExportError, match="no space left on the device") as info:
        with staged_folder(out):
            raise SafetensorError(
                "Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                'message: "No space left on device" })'
            )
    assert str(info.value).startswith(f"{out}: ") and list(tmp_path.iterdir()) == []


def test_a_working_folder_or_home_at_the_root_still_lets_exports_through(tmp_path, monkeypatch):
    from dlm.errors import ExportRefused
    from dlm.export.publish import Destination, check_destination

    monkeypatch.chdir("/")
    monkeypatch.setenv("HOME", "/")
    check_destination(Destination(tmp_path / "out"))
    with pytest.raises(ExportRefused, match="must never replace"):
        check_destination(Destination(Path("/"), force=True))


def _other_store(dlm_home: Path, doc_store: Path) -> Path:
    """A second document's store in the same DLM_HOME (a copy of this one under another id)."""
    import shutil

    other = dlm_home / "store" / "01JD7Z8K2M4N6P8Q0R2S4T6V9Z"
    shutil.copytree(doc_store, other)
    return other


def test_no_part_of_dlm_home_is_ever_an_export_folder(doc, dlm_home, adapter_dir):
    other = _other_store(dlm_home, adapter_dir.parents[2])
    (dlm_home / "models" / "smollm2-135m").mkdir(parents=True)
    (dlm_home / "models" / "smollm2-135m" / "model.safetensors").write_bytes(b"weights")
    (dlm_home / "cache").mkdir()
    (dlm_home / "cache" / "index.sqlite").write_bytes(b"cache")
    before = _tree(dlm_home)
    for target in (other, other / "adapter", dlm_home / "models", dlm_home / "cache", dlm_home, dlm_home / "new"):
        result = CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(target), "--force"])
        assert result.exit_code == 1, (target, result.output)
        (line,) = _lines(result.output)
        assert "must never replace" in line and str(target) in line
    assert _tree(dlm_home) == before


@pytest.mark.parametrize("variable", ["DLM_MODELS_DIR", "DLM_CACHE_DIR"])
def test_the_models_and_cache_folders_are_guarded_where_they_are_moved(tmp_path, monkeypatch, variable):
    from dlm.errors import ExportRefused
    from dlm.export.publish import Destination, check_destination

    moved = tmp_path / "elsewhere" / "state"
    moved.mkdir(parents=True)
    monkeypatch.setenv(variable, str(moved))
    for target in (moved, moved / "sub", moved.parent):
        with pytest.raises(ExportRefused, match="must never replace"):
            check_destination(Destination(target, force=True))


def test_a_folder_holding_a_store_is_refused_even_with_force(doc, dlm_home, adapter_dir, tmp_path):
    import shutil

    backup = tmp_path / "backup"
    shutil.copytree(adapter_dir.parents[2], backup / "stores" / "mine")
    before = _tree(backup)
    result = CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(backup), "--force"])
    assert result.exit_code == 1, result.output
    (line,) = _lines(result.output)
    assert "store" in line and "must never replace" in line
    assert _tree(backup) == before


def test_one_export_per_folder_at_a_time(tmp_path):
    out = tmp_path / "out"
    with staged_folder(out) as first:
        (first / "a.txt").write_text("first")
        with pytest.raises(ExportError) as info:
            with staged_folder(out) as second:
                (second / "a.txt").write_text("second")
        (line,) = _lines(str(info.value))
        assert str(out) in line and "another dlm export" in line and "staging" not in line
    assert (out / "a.txt").read_text() == "first"
    with staged_folder(out) as third:  # the lock is released with the first export
        (third / "a.txt").write_text("third")
    assert (out / "a.txt").read_text() == "third"


def test_a_symlink_out_is_written_through(doc, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    for _ in range(2):  # the second replaces the first export, through the link again
        result = CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(link)])
        assert result.exit_code == 0, result.output
        assert link.is_symlink() and link.resolve() == real.resolve()
        assert sorted(p.name for p in real.iterdir()) == [MARKER, *PEFT_FILES]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc", "link", "real"]


def test_a_dangling_symlink_out_is_one_line_naming_it(doc, tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    result = CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(link)])
    assert result.exit_code == 1
    (line,) = _lines(result.output)
    assert str(link) in line and "staging" not in line and "gone" in line
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["doc", "link"]


def test_a_failed_write_names_the_file_inside_the_export_never_the_staging_folder(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ExportError) as info:
        with staged_folder(out) as staging:
            raise OSError(errno.EIO, "Input/output error", str(staging / "sub" / "model.safetensors"))
    assert str(info.value) == f"{out}: writing the export failed: Input/output error (sub/model.safetensors)"

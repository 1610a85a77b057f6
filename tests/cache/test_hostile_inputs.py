"""Hostile documents, environment variables and remote URLs through `dlm cache ...`:
each gives one clear line and exit 1, or a warning and exit 0 where the run can go on;
never an unexpected error."""

from __future__ import annotations

import gc
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.cli.cache_cmd import cache_app

runner = CliRunner()
DLM_ID = "01JDCACHE00000000000000000"
REPO = Path(__file__).resolve().parents[2]


def write_doc(tmp_path: Path, source_lines: str = "", base_model: str = "smollm2-135m") -> Path:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    src = tmp_path / "src"
    if not src.exists():
        src.mkdir()
        for name in ("colorsys.py", "bisect.py"):
            shutil.copy2(stdlib / name, src / name)
    path = tmp_path / "doc.dlm"
    path.write_text(
        f"---\ndlm_id: {DLM_ID}\nbase_model: {base_model}\ntraining:\n"
        f"  sources:\n    - path: {src}\n      include: ['*.py']\n{source_lines}---\n\n# Notes\n\nSome prose.\n"
    )
    return path


def one_error_line(result, *needles: str) -> str:
    """The command failed with exit 1 and one line on stderr that names every needle."""
    assert result.exit_code == 1, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "unexpected" not in lines[0] and all(n in lines[0] for n in needles), lines[0]
    return lines[0]


@pytest.mark.parametrize("cap", [60_000_000_000, 2**63 - 1, 2**63, 2**64])
def test_a_huge_max_bytes_per_file_is_one_line(tmp_path: Path, smollm2_ref, cap: int):
    doc = write_doc(tmp_path, f"      max_bytes_per_file: {cap}\n")
    one_error_line(runner.invoke(cache_app, ["build", str(doc)]), "max_bytes_per_file")


def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_a_refused_ftp_remote_is_a_warning_and_the_build_goes_on(tmp_path: Path, smollm2_ref):
    doc = write_doc(tmp_path)
    result = runner.invoke(
        cache_app,
        ["build", str(doc), "--cache-remote", f"ftp://127.0.0.1:{closed_port()}/c"],
        env={"DLM_CACHE_REMOTE_TIMEOUT": "2"},
    )
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if "cache remote unavailable" in line]
    assert len(warnings) == 1 and "unexpected" not in result.output


@pytest.mark.parametrize("value", ["abc", "-1"])  # every bad kind: tests/cache/test_remote.py
def test_a_bad_remote_timeout_is_one_line(tmp_path: Path, smollm2_ref, value: str):
    doc = write_doc(tmp_path)
    env = {"DLM_CACHE_REMOTE_TIMEOUT": value}
    one_error_line(
        runner.invoke(cache_app, ["build", str(doc), "--cache-remote", str(tmp_path / "r")], env=env),
        "DLM_CACHE_REMOTE_TIMEOUT",
    )
    assert runner.invoke(cache_app, ["build", str(doc)], env=env).exit_code == 0  # no remote: not read


def test_a_cache_warning_is_printed_once(tmp_path: Path, smollm2_ref):
    """In a real process (no test logging capture): the CLI's `warning:` line only."""
    doc = write_doc(tmp_path)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "HF_HUB_OFFLINE": "1",
        "DLM_HOME": str(tmp_path / "home"),
        "DLM_CACHE_REMOTE_TIMEOUT": "2",
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dlm",
            "cache",
            "build",
            str(doc),
            "--json",
            "--cache-remote",
            f"ftp://127.0.0.1:{closed_port()}/c",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("cache remote unavailable") == 1, done.stderr


def test_a_push_to_an_unusable_remote_is_an_error_that_does_not_say_continuing(tmp_path: Path, smollm2_ref):
    doc = write_doc(tmp_path)
    assert runner.invoke(cache_app, ["build", str(doc)]).exit_code == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    line = one_error_line(
        runner.invoke(cache_app, ["push", str(doc), "--cache-remote", str(blocker / "remote")]),
        "cache remote unavailable",
        "push did not complete",
    )
    assert "continuing" not in line


def test_a_hand_edited_export_is_one_line(tmp_path: Path, smollm2_ref):
    import json

    import xxhash
    from test_hand_edited_export import members_of, write_tar

    doc = write_doc(tmp_path)
    assert runner.invoke(cache_app, ["build", str(doc)]).exit_code == 0
    assert runner.invoke(cache_app, ["export", str(doc), str(tmp_path / "x.tar")]).exit_code == 0
    members = members_of(tmp_path / "x.tar")
    lines = [json.loads(x) for x in members["entries.jsonl"].splitlines()]
    lines[0]["nbytes"] = 10**15
    members["entries.jsonl"] = ("\n".join(json.dumps(x) for x in lines) + "\n").encode()
    manifest = json.loads(members["manifest.json"])
    manifest["entries_xxh3_64"] = xxhash.xxh3_64_hexdigest(members["entries.jsonl"])
    members["manifest.json"] = json.dumps(manifest).encode()
    edited = write_tar(tmp_path / "edited.tar", members)
    one_error_line(runner.invoke(cache_app, ["import", str(doc), str(edited)]), "nbytes", "line 1")


@pytest.fixture
def read_only_view(tmp_path: Path):
    """A read-only bind mount of a folder (root and mount needed; skipped elsewhere)."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("needs root and mount for a read-only bind mount")
    made: list[Path] = []

    def view(folder: Path) -> Path:
        target = tmp_path / f"ro-{len(made)}"
        target.mkdir()
        ok = subprocess.run(["mount", "--bind", str(folder), str(target)], capture_output=True).returncode == 0
        if (
            not ok
            or subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], capture_output=True).returncode != 0
        ):
            if ok:
                subprocess.run(["umount", str(target)], capture_output=True)
            pytest.skip("cannot make a read-only bind mount here")
        made.append(target)
        return target

    yield view
    gc.collect()  # connections left open on the view by the command run in this process
    for target in made:
        subprocess.run(["umount", "-l", str(target)], capture_output=True)


def test_show_on_a_read_only_cache_reports_its_entries(
    tmp_path: Path, smollm2_ref, read_only_view, monkeypatch: pytest.MonkeyPatch
):
    import json

    doc = write_doc(tmp_path)
    built = runner.invoke(cache_app, ["build", str(doc), "--json"])
    assert built.exit_code == 0
    gc.collect()  # the build's connections close: SQLite removes the -wal and -shm files
    home = Path(os.environ["DLM_HOME"])
    assert not list(home.glob("cache/*-shm"))
    monkeypatch.setenv("DLM_HOME", str(read_only_view(home)))
    shown = runner.invoke(cache_app, ["show", str(doc), "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["entry_count"] == json.loads(built.stdout)["rows"] > 0


def test_show_on_an_unreadable_index_is_one_line(tmp_path: Path, smollm2_ref):
    import json

    doc = write_doc(tmp_path)
    assert runner.invoke(cache_app, ["build", str(doc)]).exit_code == 0
    index = Path(json.loads(runner.invoke(cache_app, ["show", str(doc), "--json"]).stdout)["path"]) / "index.sqlite"
    gc.collect()
    for extra in ("-wal", "-shm"):
        Path(f"{index}{extra}").unlink(missing_ok=True)
    index.write_bytes(b"garbage" * 1000)
    one_error_line(runner.invoke(cache_app, ["show", str(doc)]), "index.sqlite")


def test_a_missing_source_path_is_reported_before_any_model_work(tmp_path: Path):
    doc = write_doc(tmp_path)
    doc.write_text(doc.read_text().replace(f"path: {tmp_path / 'src'}", "path: ./no-such-folder"))
    line = one_error_line(runner.invoke(cache_app, ["build", str(doc)]), "training.sources[0].path", "does not exist")
    assert line.split("error: ", 1)[-1].startswith(f"{doc}:6:13: ")
    assert not (Path(os.environ["DLM_HOME"]) / "models").exists(), "the base model was converted first"


def test_a_misspelled_base_model_names_its_line(tmp_path: Path):
    doc = write_doc(tmp_path, base_model="smollm2-13m")
    line = one_error_line(runner.invoke(cache_app, ["build", str(doc)]), "base_model", "smollm2-135m")
    assert f"{doc}:3:13" in line
    assert not (Path(os.environ["DLM_HOME"]) / "models").exists()

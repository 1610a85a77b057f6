"""`dlm cache ...` through typer's CliRunner, on the real SmolLM2 tokenizer."""

from __future__ import annotations

import json
import shutil
import sysconfig
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.cli.cache_cmd import cache_app

runner = CliRunner()
DLM_ID = "01JDCACHE00000000000000000"


@pytest.fixture
def doc(tmp_path: Path, smollm2_ref) -> Path:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    src = tmp_path / "src"
    src.mkdir()
    for name in ("json/decoder.py", "json/scanner.py", "colorsys.py", "bisect.py"):
        shutil.copy2(stdlib / name, src / name.replace("/", "_"))
    path = tmp_path / "doc.dlm"
    path.write_text(
        f"---\ndlm_id: {DLM_ID}\nbase_model: smollm2-135m\ntraining:\n"
        "  replay: 0\n  synth:\n    enabled: false\n"  # the counts below are the document's rows alone
        f"  sources:\n    - path: {src}\n      include: ['*.py']\n---\n\n# Notes\n\nSome prose.\n"
    )
    return path


def invoke(*args: str, **kw):
    result = runner.invoke(cache_app, list(args), **kw)
    return result


def as_json(*args: str) -> dict:
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_cache_commands_end_to_end(doc: Path, tmp_path: Path):
    assert "no cache yet" in invoke("show", str(doc)).stdout
    cold = as_json("build", str(doc))
    assert cold["rows"] == 5 and cold["misses"] == 5 and cold["files_taken"] == 4
    warm = as_json("build", str(doc))
    assert warm["hits"] == 5 and warm["misses"] == 0
    summary = as_json("show", str(doc))
    assert summary["entry_count"] == 5 and summary["token_dtype"] == "uint16"
    assert summary["tokenizer_sha256"].startswith("sha256:")
    human = invoke("show", str(doc)).stdout
    assert "100.0% (5/5)" in human and "uint16" in human

    export = tmp_path / "cache.tar"
    assert as_json("export", str(doc), str(export))["entries"] == 5
    refused = invoke("clear", str(doc), input="n\n")
    assert refused.exit_code == 1 and as_json("show", str(doc))["entry_count"] == 5
    assert as_json("clear", str(doc), "--force")["removed_entries"] == 5
    assert as_json("show", str(doc))["entry_count"] == 0
    assert as_json("import", str(doc), str(export))["entries_imported"] == 5
    assert as_json("build", str(doc))["misses"] == 0

    assert as_json("prune", str(doc))["removed_entries"] == 0  # default 90d keeps fresh entries
    bad = invoke("prune", str(doc), "--older-than", "3 weeks")
    assert bad.exit_code == 2 and "--older-than" in bad.stderr


def test_export_without_cache_is_one_error_line(doc: Path, tmp_path: Path):
    result = invoke("export", str(doc), str(tmp_path / "x.tar"))
    assert result.exit_code == 1 and "no tokenized-section cache yet" in result.stderr


def test_shared_store_and_remote_through_the_cli(doc: Path, tmp_path: Path):
    remote = str(tmp_path / "remote")
    cold = as_json("build", str(doc), "--cache-remote", remote)
    assert cold["misses"] == 5
    other = tmp_path / "other.dlm"
    other.write_text(doc.read_text().replace(DLM_ID, "01JDCACHE00000000000000002"))
    second = as_json("build", str(other))
    assert second["misses"] == 0 and second["hits"] == 5
    shown = as_json("show", str(other))
    assert shown["entry_count"] == 5 and shown["shared_entries"] == 5 and shown["store_entry_count"] == 5
    assert as_json("clear", str(other), "--force")["removed_entries"] == 0  # all shared
    assert as_json("clear", str(doc), "--force", "--all")["removed_entries"] == 5
    pulled = as_json("pull", str(doc), "--cache-remote", remote)
    assert pulled["entries"] == 5 and pulled["bytes"] > 0
    warm = as_json("build", str(doc))
    assert warm["misses"] == 0
    assert as_json("push", str(doc), "--cache-remote", remote)["entries"] == 0
    missing = invoke("push", str(doc))
    assert missing.exit_code == 2 and "no cache remote" in missing.output

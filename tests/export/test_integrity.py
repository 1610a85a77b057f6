"""The adapter is checked against the `adapter_sha256` training recorded before anything
is exported or verified: a damaged adapter is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.actions.exporting import export
from dlm.cli.main import app
from dlm.errors import ExportRefused

pytestmark = pytest.mark.integration


def _flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # inside the tensor data: safetensors still opens it
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("fmt", ["peft", "merged", "gguf"])
def test_a_damaged_adapter_is_refused_before_anything_is_written(doc, adapter_dir, tmp_path, fmt):
    _flip_a_byte(adapter_dir / "adapter_model.safetensors")
    result = CliRunner().invoke(app, ["export", str(doc), "--format", fmt, "--verify", "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    (line,) = [x for x in result.output.splitlines() if x.strip()]
    assert "damaged or edited after training" in line and "manifest.json" in line
    assert not (tmp_path / "out").exists()


def test_a_truncated_adapter_is_refused_in_one_line(doc, adapter_dir, tmp_path):
    weights = adapter_dir / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    with pytest.raises(ExportRefused, match="damaged or edited") as info:
        export(doc, format="peft", out=tmp_path / "out")
    assert "\n" not in str(info.value)


def test_the_lock_hash_is_checked_too(doc, dlm_home, tmp_path):
    report = export(doc, format="peft", out=tmp_path / "ok")
    assert report.adapter_checked_against == "manifest+lock" and report.adapter_sha256.startswith("sha256:")
    lock = next((dlm_home / "store").glob("*/dlm.lock"))
    data = json.loads(lock.read_text())
    data["adapter_sha256"] = "sha256:" + "0" * 64
    lock.write_text(json.dumps(data))
    with pytest.raises(ExportRefused, match="dlm.lock records sha256:0000"):
        export(doc, format="peft", out=tmp_path / "out")


def test_prompt_and_serve_refuse_a_damaged_adapter_as_export_does(doc, adapter_dir):
    from dlm.actions.serving import ServeOptions, build_app
    from dlm.errors import StoreError

    _flip_a_byte(adapter_dir / "adapter_model.safetensors")
    runner = CliRunner()
    result = runner.invoke(app, ["prompt", str(doc), "Hi", "--max-new-tokens", "2"])
    assert result.exit_code == 1, result.output
    (line,) = [x for x in result.output.splitlines() if x.strip()]
    assert "damaged or edited after training" in line and "--no-adapter" in line and str(adapter_dir) in line
    with pytest.raises(StoreError, match="damaged or edited after training") as info:
        build_app(ServeOptions([doc], reload_interval=0))
    assert "\n" not in str(info.value)
    base_alone = runner.invoke(app, ["prompt", str(doc), "Hi", "--max-new-tokens", "2", "--no-adapter"])
    assert base_alone.exit_code == 0, base_alone.output

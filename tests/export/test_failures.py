"""Export failures are one line naming the file and the way out: never `unexpected ...`,
never the staging folder, and a full disk says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.cli.main import app
from dlm.export import BaseSpec, write_gguf

pytestmark = pytest.mark.integration


def _forget_recorded_hashes(dlm_home: Path) -> None:
    """A store from before hashes were recorded: the damage is found by reading the files."""
    store = next((dlm_home / "store").glob("*/"))
    (store / "dlm.lock").unlink()
    manifest = json.loads((store / "manifest.json").read_text())
    for entry in manifest["adapters"]:
        entry.pop("adapter_sha256", None)
    (store / "manifest.json").write_text(json.dumps(manifest))


def _one_line(result) -> str:
    assert result.exit_code == 1, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "unexpected" not in lines[0] and "staging" not in lines[0]
    return lines[0]


@pytest.mark.parametrize("fmt", ["peft", "gguf", "merged"])
def test_a_truncated_safetensors_file_is_one_line(doc, dlm_home, adapter_dir, tmp_path, fmt):
    _forget_recorded_hashes(dlm_home)
    weights = adapter_dir / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    line = _one_line(CliRunner().invoke(app, ["export", str(doc), "--format", fmt, "--out", str(tmp_path / "o")]))
    assert "adapter_model.safetensors: not a readable safetensors file" in line
    assert not (tmp_path / "o").exists()


def test_a_config_with_a_wrong_type_is_one_line(doc, dlm_home, adapter_dir, tmp_path):
    _forget_recorded_hashes(dlm_home)
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    (adapter_dir / "adapter_config.json").write_text(json.dumps({**config, "r": "eight"}))
    line = _one_line(CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(tmp_path / "o")]))
    assert "'eight'" in line and "must be numbers" in line


FAKE_CONVERTER = """import sys
sys.stderr.write("Converting...:  50%|#####     | 1/2 [00:01<00:01, 1.00it/s]\\n")
out = sys.argv[sys.argv.index("--outfile") + 1]
sys.stderr.write(f"OSError: {MESSAGE}: '{out}'\\n")
sys.exit(1)
"""


@pytest.mark.parametrize(
    "message, expected",
    [
        ("[Errno 28] No space left on device", "no space left on the device"),
        ("[Errno 5] Input/output error", "llama.cpp's LoRA converter failed: OSError: [Errno 5] Input/output error"),
    ],
)
def test_a_converter_failure_is_one_line_without_the_staging_folder(
    adapter_dir, smollm2_ref, tmp_path, monkeypatch, message, expected
):
    from dlm.errors import ExportError

    fake = tmp_path / "llama.cpp"
    fake.mkdir()
    (fake / "convert_lora_to_gguf.py").write_text(FAKE_CONVERTER.replace("{MESSAGE}", message))
    monkeypatch.setenv("DLM_LLAMA_CPP_DIR", str(fake))
    with pytest.raises(ExportError) as info:
        write_gguf(adapter_dir, BaseSpec("smollm2-135m", smollm2_ref.path), tmp_path / "out")
    text = str(info.value)
    assert expected in text and "staging" not in text and "it/s" not in text and "\n" not in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc", "llama.cpp"]

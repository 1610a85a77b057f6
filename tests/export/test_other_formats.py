"""merged and peft exports of a real SmolLM2 adapter, and the CLI command."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from dlm.actions.exporting import export
from dlm.cli.main import app
from dlm.export.verify import HELD_OUT_TEXT, peft_logits

pytestmark = pytest.mark.integration


def test_merged_folder_reloads_with_logits_equal_to_peft(doc, adapter_dir, smollm2_ref, smollm2_tokenizer):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    report = export(doc, format="merged")
    out = Path(report.out)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(report.files)
    assert all(stat.S_IMODE((out / f).stat().st_mode) == 0o644 for f in report.files)
    ids = smollm2_tokenizer(HELD_OUT_TEXT, add_special_tokens=False)["input_ids"]
    base_logits, peft_adapted = peft_logits(smollm2_ref.path, adapter_dir, ids)
    merged = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = merged(input_ids=torch.tensor([ids])).logits[0].numpy()
    assert abs(logits - peft_adapted).max() <= 1e-4 * abs(peft_adapted).max()
    assert abs(peft_adapted - base_logits).max() > 1e-3  # the adapter changes something
    tokenizer = AutoTokenizer.from_pretrained(out)
    messages = [{"role": "user", "content": "hi"}]
    trained = [{"role": "system", "content": "You answer in one sentence."}, *messages]  # the document's
    assert tokenizer.apply_chat_template(messages, tokenize=False) == smollm2_tokenizer.apply_chat_template(
        trained, tokenize=False
    )
    assert report.system_prompt["source"] == "document" and report.dtype == "float32"
    config = json.loads((out / "config.json").read_text())
    assert config["rope_theta"] == config["rope_parameters"]["rope_theta"] == 100000.0
    tokenizer_config = json.loads((out / "tokenizer_config.json").read_text())
    assert tokenizer_config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert not {"is_local", "local_files_only"} & set(tokenizer_config)


def test_merged_dtype_is_chosen_and_refused_for_formats_without_one(doc, tmp_path):
    from safetensors import safe_open

    from dlm.errors import UsageError

    report = export(doc, format="merged", dtype="bfloat16", out=tmp_path / "bf16")
    with safe_open(str(Path(report.out) / "model.safetensors"), framework="pt") as fh:
        assert fh.get_tensor(next(iter(fh.keys()))).dtype == torch.bfloat16
    assert json.loads((Path(report.out) / "config.json").read_text())["torch_dtype"] == "bfloat16"
    with pytest.raises(UsageError, match="--dtype float16: only --format merged and gguf-merged"):
        export(doc, format="peft", dtype="float16", out=tmp_path / "p")
    with pytest.raises(UsageError, match="--dtype q8_0: --format merged takes one of float32"):
        export(doc, format="merged", dtype="q8_0", out=tmp_path / "m")


def test_peft_folder_loads_in_transformers_and_prints_vllm_command(doc, adapter_dir, smollm2_ref):
    from transformers import AutoModelForCausalLM

    report = export(doc, format="peft", verify=True)
    out = Path(report.out)
    assert report.files == (
        "adapter_config.json",
        "adapter_model.safetensors",
        "chat_template.jinja",
        "tokenizer.json",
        "tokenizer_config.json",
    )
    assert "You answer in one sentence." in (out / "chat_template.jinja").read_text()
    assert (out / "adapter_model.safetensors").read_bytes() == (adapter_dir / "adapter_model.safetensors").read_bytes()
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(smollm2_ref.path)
    assert report.command == (
        f"vllm serve {smollm2_ref.path} --enable-lora "
        f"--lora-modules notes={out} --max-lora-rank 8 "
        f"--chat-template {out / 'chat_template.jinja'}"
    )
    assert report.verify["check"] == "peft-load" and report.verify["passed"], report.verify
    assert report.verify["numbers"]["unmatched_modules"] == 0
    assert 0.99 <= report.verify["numbers"]["adapter_effect"] <= 1.01
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)  # base found through the config
    assert model.active_adapters() == ["default"]


def test_cli_export_json_and_table(doc, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(doc), "--format", "peft", "--out", str(tmp_path / "p"), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["format"] == "peft" and data["adapter_version"] == "v0001" and data["base_checked_against"] == "lock"
    result = runner.invoke(app, ["export", str(doc), "--format", "peft", "--out", str(tmp_path / "p")])
    assert result.exit_code == 0 and "vllm serve" in result.output and "v0001 as peft" in result.output


def test_cli_refusal_is_one_line_and_exit_1(doc, tmp_path):
    result = CliRunner().invoke(app, ["export", str(doc), "--adapter-version", "v0009", "--out", str(tmp_path / "x")])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "v0009" in lines[0] and "v0001" in lines[0]
    assert not (tmp_path / "x").exists()


def test_a_body_error_warns_but_the_trained_adapter_still_exports(doc, tmp_path):
    doc.write_text(doc.read_text() + "\n::instruction::\n\n### Q\nA question with no answer\n")
    report = export(doc, format="peft", out=tmp_path / "p")
    (warning,) = report.warnings
    assert warning.startswith(f"{doc}:") and "exported the adapter already trained" in warning
    result = CliRunner().invoke(app, ["export", str(doc), "--format", "peft", "--out", str(tmp_path / "p")])
    assert result.exit_code == 0 and "warning:" in result.output


def test_a_frontmatter_error_still_refuses(doc, tmp_path):
    from dlm.errors import DocError

    doc.write_text(doc.read_text().replace("base_model: smollm2-135m", "base_model: [oops"))
    with pytest.raises(DocError):
        export(doc, format="peft", out=tmp_path / "p")


def test_peft_verify_fails_an_adapter_whose_module_names_the_base_lacks(
    doc, adapter_dir, smollm2_ref, smollm2_tokenizer, tmp_path
):
    """A runtime matching by module name would serve the base: names and effect both say so."""
    import shutil

    from safetensors.numpy import load_file, save_file

    from dlm.export.verify import verify_peft

    renamed = tmp_path / "renamed"
    shutil.copytree(adapter_dir, renamed)
    weights = load_file(str(adapter_dir / "adapter_model.safetensors"))
    save_file(
        {k.replace(".layers.", ".blocks."): v for k, v in weights.items()}, str(renamed / "adapter_model.safetensors")
    )
    config = json.loads((renamed / "adapter_config.json").read_text())
    (renamed / "adapter_config.json").write_text(
        json.dumps({**config, "base_model_name_or_path": str(smollm2_ref.path)})
    )
    result = verify_peft(renamed, smollm2_ref.path, adapter_dir, smollm2_tokenizer)
    assert not result.passed and result.numbers["unmatched_modules"] > 0
    assert abs(result.numbers["adapter_effect"]) < 0.05  # nothing loaded: the base

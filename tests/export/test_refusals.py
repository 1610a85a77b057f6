"""Every refusal: one clear error, raised before anything is written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dlm.actions.exporting import export
from dlm.errors import DlmError
from dlm.export import BaseSpec, ExportError, ExportRefused, refusals, write_gguf, write_merged, write_peft
from dlm.export.adapter import AdapterInfo, vllm_max_lora_rank
from dlm.export.ollama import chatml_profile, tokenizer_render
from dlm.export.publish import staged_folder

pytestmark = pytest.mark.integration


def _edited(adapter_dir: Path, dest: Path, **changes) -> Path:
    shutil.copytree(adapter_dir, dest)
    config = json.loads((dest / "adapter_config.json").read_text())
    (dest / "adapter_config.json").write_text(json.dumps({**config, **changes}))
    return dest


@pytest.mark.parametrize(
    "changes",
    [
        {"modules_to_save": ["lm_head"]},
        {"target_modules": ["q_proj", "embed_tokens"]},
        {"trainable_token_indices": {"embed_tokens": [1, 2]}},
    ],
)
def test_embeddings_or_lm_head_are_refused_for_every_format(adapter_dir, tmp_path, smollm2_ref, changes):
    edited = _edited(adapter_dir, tmp_path / "a", **changes)
    base = BaseSpec("smollm2-135m", smollm2_ref.path)
    for write in (write_gguf, write_merged, write_peft):
        kwargs = {"model_name": "x"} if write is write_peft else {}
        args = (edited, base, tmp_path / "out") + ((None,) if write is write_merged else ())
        with pytest.raises(ExportRefused, match="embeddings or lm_head"):
            write(*args, **kwargs)
    assert not (tmp_path / "out").exists()


def test_dora_is_refused_except_for_merged(adapter_dir, tmp_path, smollm2_ref):
    edited = _edited(adapter_dir, tmp_path / "a", use_dora=True)
    with pytest.raises(ExportRefused, match="DoRA"):
        write_gguf(edited, BaseSpec("smollm2-135m", smollm2_ref.path), tmp_path / "out")
    from dlm.export import read_adapter

    info = read_adapter(edited)
    assert refusals(info, "merged") == [] and refusals(info, "peft") and refusals(info, "ollama")


def test_rslora_scaling_gguf_cannot_express_is_refused(adapter_dir, tmp_path):
    info = AdapterInfo(
        folder=tmp_path,
        config={"use_rslora": True, "peft_type": "LORA"},
        r=8,
        alpha=16.0,
        tensor_names=(),
        ranks=(8, 16),
    )
    (problem,) = refusals(info, "gguf")
    assert "rsLoRA" in problem and "merged" in problem
    assert refusals(info, "merged") == []
    uniform = AdapterInfo(folder=tmp_path, config={"use_rslora": True}, r=8, alpha=16.0, tensor_names=(), ranks=(8,))
    assert refusals(uniform, "gguf") == []


def test_alpha_pattern_is_refused_for_gguf_and_peft(adapter_dir, tmp_path, smollm2_ref):
    edited = _edited(adapter_dir, tmp_path / "a", alpha_pattern={"q_proj": 32})
    base = BaseSpec("smollm2-135m", smollm2_ref.path)
    with pytest.raises(ExportRefused, match="alpha_pattern"):
        write_gguf(edited, base, tmp_path / "out")
    with pytest.raises(ExportRefused, match="one scale"):
        write_peft(edited, base, tmp_path / "out", model_name="x")


def test_rank_above_vllm_limit_is_refused_and_max_lora_rank_is_the_next_allowed(tmp_path):
    big = AdapterInfo(folder=tmp_path, config={}, r=1024, alpha=16.0, tensor_names=(), ranks=(1024,))
    (problem,) = refusals(big, "peft")
    assert "1024" in problem and "512" in problem
    assert [vllm_max_lora_rank(r) for r in (1, 4, 8, 12, 300, 512)] == [1, 8, 8, 16, 320, 512]


def test_base_other_than_the_locked_one_is_refused(doc, dlm_home, tmp_path):
    lock = next((dlm_home / "store").glob("*/dlm.lock"))
    data = json.loads(lock.read_text())
    data["base_model"]["revision"] = "sha256:" + "0" * 64
    lock.write_text(json.dumps(data))
    with pytest.raises(ExportRefused, match="trained on base") as info:
        export(doc, format="peft", out=tmp_path / "out")
    assert str(lock) in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "out").exists()


def test_without_a_lock_the_base_is_checked_against_the_manifest(doc, dlm_home, tmp_path):
    store = next((dlm_home / "store").glob("*/"))
    (store / "dlm.lock").unlink()
    assert export(doc, format="peft", out=tmp_path / "ok").base_checked_against == "manifest"
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["base_model"]["revision"] = "sha256:" + "1" * 64
    (store / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ExportRefused, match="manifest.json: the adapter was trained on base"):
        export(doc, format="peft", out=tmp_path / "out")


def test_unknown_version_and_missing_adapter_are_refused(doc, dlm_home, tmp_path):
    with pytest.raises(ExportError, match="v0042.*versions: v0001"):
        export(doc, format="gguf", adapter_version="v0042", out=tmp_path / "out")
    shutil.rmtree(dlm_home / "store")
    with pytest.raises(ExportError, match="no adapter trained yet"):
        export(doc, format="gguf", out=tmp_path / "out")
    with pytest.raises(ExportError, match="no adapter here"):
        write_peft(tmp_path / "nothing", BaseSpec("b", tmp_path), tmp_path / "out", model_name="x")
    assert not (tmp_path / "out").exists()


def test_unknown_format_is_refused(doc, tmp_path):
    with pytest.raises(DlmError, match="--format onnx"):
        export(doc, format="onnx", out=tmp_path / "out")


def test_non_chatml_template_is_refused_for_ollama(smollm2_tokenizer):
    tokenizer = smollm2_tokenizer.__class__.from_pretrained(smollm2_tokenizer.name_or_path)
    tokenizer.chat_template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    with pytest.raises(ExportRefused, match="not ChatML-style"):
        chatml_profile(tokenizer_render(tokenizer), tokenizer.eos_token, "base")
    profile = chatml_profile(tokenizer_render(smollm2_tokenizer), smollm2_tokenizer.eos_token, "base")
    assert profile.default_system and profile.stops == ("<|im_end|>",)


def test_missing_converter_fails_cleanly_and_leaves_nothing(adapter_dir, tmp_path, smollm2_ref, monkeypatch):
    monkeypatch.setenv("DLM_LLAMA_CPP_DIR", str(tmp_path / "empty"))
    with pytest.raises(ExportError, match="make install"):
        write_gguf(adapter_dir, BaseSpec("smollm2-135m", smollm2_ref.path), tmp_path / "out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["doc"]  # the fixture's copy; no out, no staging


def test_failed_write_keeps_the_previous_export(tmp_path):
    out = tmp_path / "out"
    with staged_folder(out) as staging:
        (staging / "a.txt").write_text("first")
    with pytest.raises(RuntimeError):
        with staged_folder(out) as staging:
            (staging / "a.txt").write_text("second, half")
            raise RuntimeError("disk full")
    assert (out / "a.txt").read_text() == "first"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    with staged_folder(out) as staging:
        (staging / "b.txt").write_text("third")
    assert sorted(p.name for p in out.iterdir()) == [".dlm-export", "b.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]

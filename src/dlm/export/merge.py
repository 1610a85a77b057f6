"""The merged model: the adapter folded into the base weights, saved as a transformers
folder that loads without peft (`--format merged`, and the input of `gguf-merged`).

The merge runs in float32 (peft `merge_and_unload` on the float32 base, as dlm trains
and prompts); the result is cast to `dtype` only when saved:

    float32    538 MB for SmolLM2-135M; logits equal peft's within 1e-4 of the largest
    float16    half the size; what vLLM and llama.cpp's f16 GGUF run
    bfloat16   half the size; SmolLM2's own release dtype

The folder is `save_pretrained`'s (`config.json`, `generation_config.json`,
`model.safetensors`) plus the tokenizer files of `dlm.export.hf_folder` (the
document's system prompt in the chat template), with `config.json` rewritten there
for transformers 4.x.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlm.errors import ExportError

DTYPES = ("float32", "float16", "bfloat16")


def merged_model(base_dir: Path, adapter_dir: Path, dtype: str = "float32") -> Any:
    """The base at `base_dir` with the peft adapter at `adapter_dir` merged in, cast to `dtype`.

    Raises:
        ExportError: `dtype` is not one of `DTYPES`, or the base or adapter cannot be
            loaded (one line, naming the folder).
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    if dtype not in DTYPES:
        raise ExportError(f"--dtype {dtype}: a merged model is one of {', '.join(DTYPES)}")
    try:
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.float32)
    except (OSError, ValueError, KeyError) as exc:
        raise ExportError(f"{base_dir}: the base model cannot be loaded ({_short(exc)})") from None
    try:
        merged = PeftModel.from_pretrained(model, adapter_dir).merge_and_unload()
    except Exception as exc:  # peft and safetensors raise their own types for a bad adapter
        raise ExportError(
            f"{adapter_dir}: the adapter cannot be loaded into the base ({_short(exc)}); retrain with `dlm train`"
        ) from None
    return merged.to(getattr(torch, dtype))


def save_merged(model: Any, folder: Path, tokenizer: Any, *, name: str, system_prompt: str | None) -> str:
    """Save `model` and `tokenizer` into `folder` (module docstring); returns the chat template.

    Raises:
        OSError: the folder cannot be written (disk full).
    """
    from dlm.export.hf_folder import rewrite_model_config, write_tokenizer_files

    model.config.name_or_path = name
    model.save_pretrained(folder, safe_serialization=True)
    config = rewrite_model_config(folder)
    return write_tokenizer_files(tokenizer, folder, system_prompt, config.get("max_position_embeddings"))


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 160 else text[:157] + "..."

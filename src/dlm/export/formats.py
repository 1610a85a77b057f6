"""One writer per export format. Each takes an adapter folder and a base, knows
nothing of documents, refuses what the format cannot express before writing, and
publishes its folder at once (`dlm.export.publish.staged_folder`, files 0644).

    gguf     <out>/adapter.gguf                               (dlm.export.gguf_file)
    ollama   <out>/adapter.gguf + <out>/Modelfile             (dlm.export.ollama)
    merged   <out>/config.json, model.safetensors, tokenizer files with the chat template
    peft     <out>/adapter_config.json + adapter_model.safetensors
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.canonical import canonical_json
from dlm.export.adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, check_exportable, read_adapter, vllm_max_lora_rank
from dlm.errors import ExportRefused
from dlm.export.gguf_file import GGUF_NAME, export_gguf
from dlm.export.ollama import MODELFILE, chatml_profile, modelfile_text, tokenizer_render
from dlm.export.publish import Destination, absolute, as_destination, check_destination


@dataclass(frozen=True)
class BaseSpec:
    """The base model as the writers need it.

    Attributes:
        name: short name written into metadata (an alias, or a folder's last part).
        path: transformers folder (`config.json`, weights, tokenizer files).
        gguf: a GGUF of the same weights (Ollama's FROM, llama.cpp's base), or None.
    """

    name: str
    path: Path
    gguf: Path | None = None


@dataclass(frozen=True)
class Written:
    """What a writer published: the folder, its files (sorted, relative) and how to run it."""

    out: Path
    files: tuple[str, ...]
    command: str


def _files(out: Path) -> tuple[str, ...]:
    from dlm.export.publish import MARKER

    return tuple(sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MARKER))


def _destination(out: Path | Destination) -> tuple[Destination, Path]:
    """`out` as a Destination, checked before any slow work, and its absolute folder."""
    dest = as_destination(out)
    check_destination(dest)
    return dest, absolute(dest.folder)


def write_gguf(adapter_dir: Path, base: BaseSpec, out: Path | Destination) -> Written:
    """Write `<out>/adapter.gguf` (float32 GGUF LoRA, normalized metadata).

    Raises:
        ExportRefused: the adapter cannot be expressed (dlm.export.adapter rules).
        ExportError: llama.cpp's converter is missing or fails.
    """
    from dlm.export.publish import staged_folder

    info = read_adapter(adapter_dir)
    check_exportable(info, "gguf")
    dest, out = _destination(out)
    with staged_folder(dest) as staging:
        export_gguf(adapter_dir, base.path / "config.json", staging / GGUF_NAME,
                    base_name=base.name, alpha=info.gguf_alpha())
    base_gguf = shlex.quote(str(base.gguf)) if base.gguf else "BASE.gguf"
    return Written(out, _files(out), f"llama-cli -m {base_gguf} --lora {shlex.quote(str(out / GGUF_NAME))}")


def write_ollama(adapter_dir: Path, base: BaseSpec, out: Path | Destination, tokenizer: Any, *,
                 system_prompt: str | None, model_name: str) -> Written:
    """Write `<out>/adapter.gguf` and `<out>/Modelfile` (see dlm.export.ollama).

    Raises:
        ExportRefused: no base GGUF, a chat template that is not ChatML, a system
            prompt with a triple quote, or an adapter rule.
        ExportError: llama.cpp's converter is missing or fails.
    """
    from dlm.export.publish import staged_folder

    info = read_adapter(adapter_dir)
    check_exportable(info, "ollama")
    if base.gguf is None:
        raise ExportRefused(
            f"{base.path}: no GGUF of the base model to put in the Modelfile's FROM; place one "
            f"(convert_hf_to_gguf.py output) in that folder, or export --format gguf"
        )
    profile = chatml_profile(tokenizer_render(tokenizer), getattr(tokenizer, "eos_token", None), str(base.path))
    text = modelfile_text(str(base.gguf), GGUF_NAME, profile, system_prompt)
    dest, out = _destination(out)
    with staged_folder(dest) as staging:
        export_gguf(adapter_dir, base.path / "config.json", staging / GGUF_NAME,
                    base_name=base.name, alpha=info.gguf_alpha())
        (staging / MODELFILE).write_text(text, encoding="utf-8")
    return Written(out, _files(out), f"ollama create {model_name} -f {shlex.quote(str(out / MODELFILE))}")


def write_merged(adapter_dir: Path, base: BaseSpec, out: Path | Destination, tokenizer: Any) -> Written:
    """Merge the adapter into the float32 base (peft `merge_and_unload`) and save a
    transformers folder (safetensors) with the tokenizer and its chat template.

    Raises:
        ExportRefused: an adapter rule (embeddings / lm_head).
    """
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from dlm.export.publish import staged_folder

    check_exportable(read_adapter(adapter_dir), "merged")
    dest, out = _destination(out)
    model = AutoModelForCausalLM.from_pretrained(base.path, dtype=torch.float32)
    merged = PeftModel.from_pretrained(model, adapter_dir).merge_and_unload()
    merged.config.name_or_path = base.name
    with staged_folder(dest) as staging:
        merged.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
    return Written(out, _files(out), f"vllm serve {shlex.quote(str(out))}")


def write_peft(adapter_dir: Path, base: BaseSpec, out: Path | Destination, *, model_name: str) -> Written:
    """Copy the adapter as vLLM and transformers load it, with `base_model_name_or_path`
    pointing at the local base folder, and give the `vllm serve` command line.

    Raises:
        ExportRefused: an adapter rule (embeddings, DoRA, rank/alpha patterns, rank above 512).
    """
    from dlm.export.publish import staged_folder

    info = read_adapter(adapter_dir)
    check_exportable(info, "peft")
    dest, out = _destination(out)
    config = dict(info.config, base_model_name_or_path=str(base.path))
    with staged_folder(dest) as staging:
        shutil.copyfile(adapter_dir / ADAPTER_WEIGHTS, staging / ADAPTER_WEIGHTS)
        (staging / ADAPTER_CONFIG).write_text(canonical_json(config), encoding="utf-8")
    command = (f"vllm serve {shlex.quote(str(base.path))} --enable-lora "
               f"--lora-modules {shlex.quote(f'{model_name}={out}')} "
               f"--max-lora-rank {vllm_max_lora_rank(info.max_rank)}")
    return Written(out, _files(out), command)


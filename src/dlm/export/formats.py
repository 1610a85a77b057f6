"""One writer per export format. Each takes an adapter folder and a base, knows
nothing of documents, refuses what the format cannot express before writing, and
publishes its folder at once (`dlm.export.publish.staged_folder`, files 0644).

    gguf         <out>/adapter.gguf                                  (dlm.export.gguf_file)
    ollama       <out>/<base>.gguf + adapter.gguf + Modelfile          (dlm.export.ollama)
    merged       <out>/config.json, model.safetensors, tokenizer files (dlm.export.merge)
    peft         <out>/adapter_config.json + adapter_model.safetensors + tokenizer files
    gguf-merged  <out>/model.gguf + Modelfile                          (dlm.export.merged_gguf)

Every format that carries a chat template (merged, peft, the Ollama TEMPLATE/SYSTEM,
the GGUF of gguf-merged) carries the document's system prompt in it
(`dlm.export.hf_folder`, `dlm.export.ollama`).
"""

from __future__ import annotations

import re
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.canonical import canonical_json
from dlm.errors import ExportRefused
from dlm.export.adapter import ADAPTER_CONFIG, ADAPTER_WEIGHTS, check_exportable, read_adapter, vllm_max_lora_rank
from dlm.export.gguf_file import GGUF_NAME, export_gguf
from dlm.export.ollama import MODELFILE, chatml_profile, modelfile_text, tokenizer_render
from dlm.export.publish import Destination, absolute, as_destination, check_destination

SAFE_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.gguf")


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


def published_files(out: Path) -> tuple[str, ...]:
    """The files of the export folder `out`, relative and sorted (the marker left out)."""
    from dlm.export.publish import MARKER

    return tuple(sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MARKER))


def checked_destination(out: Path | Destination) -> tuple[Destination, Path]:
    """`out` as a Destination, checked before any slow work, and its absolute folder."""
    dest = as_destination(out)
    check_destination(dest)
    return dest, absolute(dest.folder)


def write_gguf(
    adapter_dir: Path, base: BaseSpec, out: Path | Destination, *, system_prompt: str | None = None
) -> Written:
    """Write `<out>/adapter.gguf` (float32 GGUF LoRA, normalized metadata). A GGUF
    adapter holds no chat template, so the printed command passes `system_prompt` (`-sys`).

    Raises:
        ExportRefused: the adapter cannot be expressed (dlm.export.adapter rules).
        ExportError: llama.cpp's converter is missing or fails.
    """
    from dlm.export.publish import staged_folder

    info = read_adapter(adapter_dir)
    check_exportable(info, "gguf")
    dest, out = checked_destination(out)
    with staged_folder(dest) as staging:
        export_gguf(
            adapter_dir, base.path / "config.json", staging / GGUF_NAME, base_name=base.name, alpha=info.gguf_alpha()
        )
    base_gguf = shlex.quote(str(base.gguf)) if base.gguf else "BASE.gguf"
    command = f"llama-cli -m {base_gguf} --lora {shlex.quote(str(out / GGUF_NAME))}"
    if system_prompt:
        command += f" -sys {shlex.quote(system_prompt)}"
    return Written(out, published_files(out), command)


def shipped_base_name(base_gguf: Path) -> str:
    """The name the base GGUF gets beside the Modelfile: its own when it is a plain file
    name other than the adapter's, else `base.gguf`."""
    name = base_gguf.name
    return name if SAFE_FILE_NAME.fullmatch(name) and name not in (GGUF_NAME, "model.gguf") else "base.gguf"


def write_ollama(
    adapter_dir: Path,
    base: BaseSpec,
    out: Path | Destination,
    tokenizer: Any,
    *,
    system_prompt: str | None,
    model_name: str,
) -> Written:
    """Write the base GGUF (copied), `adapter.gguf` and a `Modelfile` naming both by
    relative path, so the folder works on any machine (see dlm.export.ollama).

    Raises:
        ExportRefused: no base GGUF, a chat template that is not ChatML, a system
            prompt Ollama cannot carry unchanged, or an adapter rule.
        ExportError: llama.cpp's converter is missing or fails.
    """
    from dlm.export.publish import staged_folder

    info = read_adapter(adapter_dir)
    check_exportable(info, "ollama")
    if base.gguf is None or not base.gguf.is_file():
        raise ExportRefused(
            f"{base.path}: no GGUF of the base model to put in the Modelfile's FROM; place one "
            f"(convert_hf_to_gguf.py output) in that folder, or export --format gguf-merged"
        )
    profile = chatml_profile(tokenizer_render(tokenizer), getattr(tokenizer, "eos_token", None), str(base.path))
    base_file = shipped_base_name(base.gguf)
    text = modelfile_text(base_file, GGUF_NAME, profile, system_prompt)
    dest, out = checked_destination(out)
    with staged_folder(dest) as staging:
        export_gguf(
            adapter_dir, base.path / "config.json", staging / GGUF_NAME, base_name=base.name, alpha=info.gguf_alpha()
        )
        shutil.copyfile(base.gguf, staging / base_file)
        (staging / MODELFILE).write_text(text, encoding="utf-8")
    return Written(out, published_files(out), f"ollama create {model_name} -f {shlex.quote(str(out / MODELFILE))}")


def write_merged(
    adapter_dir: Path,
    base: BaseSpec,
    out: Path | Destination,
    tokenizer: Any,
    *,
    system_prompt: str | None = None,
    dtype: str = "float32",
) -> Written:
    """Merge the adapter into the base (dlm.export.merge) and save a transformers
    folder with the tokenizer, the system prompt in its chat template.

    Args:
        dtype: float32 (default: what dlm prompts with), float16 or bfloat16.

    Raises:
        ExportRefused: an adapter rule (embeddings / lm_head).
        ExportError: an unknown dtype, or the base or adapter cannot be loaded.
    """
    from dlm.export.merge import merged_model, save_merged
    from dlm.export.publish import staged_folder

    check_exportable(read_adapter(adapter_dir), "merged")
    dest, out = checked_destination(out)
    merged = merged_model(base.path, adapter_dir, dtype)
    with staged_folder(dest) as staging:
        save_merged(merged, staging, tokenizer, name=base.name, system_prompt=system_prompt)
    return Written(out, published_files(out), f"vllm serve {shlex.quote(str(out))}")


def write_peft(
    adapter_dir: Path,
    base: BaseSpec,
    out: Path | Destination,
    *,
    model_name: str,
    tokenizer: Any = None,
    system_prompt: str | None = None,
) -> Written:
    """Copy the adapter as vLLM and transformers load it, with `base_model_name_or_path`
    pointing at the local base folder; with `tokenizer`, its files beside it with the
    system prompt in the chat template, which the `vllm serve` command line passes as
    `--chat-template`.

    Raises:
        ExportRefused: an adapter rule (embeddings, DoRA, rank/alpha patterns, rank above 512).
    """
    from dlm.export.hf_folder import CHAT_TEMPLATE_FILE, write_tokenizer_files
    from dlm.export.publish import staged_folder

    info = read_adapter(adapter_dir)
    check_exportable(info, "peft")
    dest, out = checked_destination(out)
    config = dict(info.config, base_model_name_or_path=str(base.path))
    with staged_folder(dest) as staging:
        shutil.copyfile(adapter_dir / ADAPTER_WEIGHTS, staging / ADAPTER_WEIGHTS)
        (staging / ADAPTER_CONFIG).write_text(canonical_json(config), encoding="utf-8")
        if tokenizer is not None:
            write_tokenizer_files(tokenizer, staging, system_prompt)
    command = (
        f"vllm serve {shlex.quote(str(base.path))} --enable-lora "
        f"--lora-modules {shlex.quote(f'{model_name}={out}')} "
        f"--max-lora-rank {vllm_max_lora_rank(info.max_rank)}"
    )
    if tokenizer is not None:
        command += f" --chat-template {shlex.quote(str(out / CHAT_TEMPLATE_FILE))}"
    return Written(out, published_files(out), command)

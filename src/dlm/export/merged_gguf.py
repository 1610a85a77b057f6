"""`--format gguf-merged`: the merged model as one GGUF, and a Modelfile without ADAPTER.

    <out>/
        model.gguf     the merged model (`dlm.export.merge`) through llama.cpp's own
                       `convert_hf_to_gguf.py` (`dlm.export.llamacpp`); f16 by default,
                       q8_0, bf16 or f32 on request; its `tokenizer.chat_template`
                       carries the document's system prompt (`dlm.export.hf_folder`)
        Modelfile      FROM ./model.gguf, TEMPLATE, PARAMETER stop, SYSTEM (`dlm.export.ollama`)

No runtime has to apply a LoRA adapter: `llama-cli -m model.gguf`, `llama-server`, and
`ollama create` on any Ollama release (including those reported to have dropped
`ADAPTER`) run the adapted weights themselves. The converter reads a float32 merged
folder written inside the staging folder and removed before it is published.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path
from typing import Any

from dlm.export.adapter import check_exportable, read_adapter
from dlm.export.formats import BaseSpec, Written, checked_destination, published_files
from dlm.export.ollama import MODELFILE, chatml_profile, modelfile_text, tokenizer_render
from dlm.export.publish import Destination

MODEL_GGUF = "model.gguf"
HF_WORK_DIR = "merged-hf"
DEFAULT_OUTTYPE = "f16"


def write_gguf_merged(
    adapter_dir: Path,
    base: BaseSpec,
    out: Path | Destination,
    tokenizer: Any,
    *,
    system_prompt: str | None,
    model_name: str,
    outtype: str = DEFAULT_OUTTYPE,
) -> Written:
    """Write `<out>/model.gguf` and `<out>/Modelfile` (module docstring).

    Args:
        outtype: `convert_hf_to_gguf.py --outtype`: f16, q8_0, bf16 or f32.

    Raises:
        ExportRefused: an adapter rule (embeddings / lm_head), a chat template that is
            not ChatML, or a system prompt Ollama cannot carry unchanged.
        ExportError: the converter is missing or fails, or the merge fails.
    """
    from dlm.errors import ExportError
    from dlm.export.llamacpp import GGUF_OUTTYPES, HF_CONVERTER, convert_model, converter_path
    from dlm.export.merge import merged_model, save_merged
    from dlm.export.publish import staged_folder

    if outtype not in GGUF_OUTTYPES:
        raise ExportError(f"--dtype {outtype}: a merged GGUF is one of {', '.join(GGUF_OUTTYPES)}")
    check_exportable(read_adapter(adapter_dir), "gguf-merged")
    converter_path(HF_CONVERTER)
    profile = chatml_profile(tokenizer_render(tokenizer), getattr(tokenizer, "eos_token", None), str(base.path))
    text = modelfile_text(MODEL_GGUF, None, profile, system_prompt)
    dest, folder = checked_destination(out)
    merged = merged_model(base.path, adapter_dir, "float32")
    with staged_folder(dest) as staging:
        work = staging / HF_WORK_DIR
        save_merged(merged, work, tokenizer, name=base.name, system_prompt=system_prompt)
        del merged
        convert_model(work, staging / MODEL_GGUF, outtype=outtype, model_name=model_name)
        shutil.rmtree(work)
        (staging / MODELFILE).write_text(text, encoding="utf-8")
    command = (
        f"ollama create {model_name} -f {shlex.quote(str(folder / MODELFILE))}  "
        f"(or: llama-cli -m {shlex.quote(str(folder / MODEL_GGUF))})"
    )
    return Written(folder, published_files(folder), command)

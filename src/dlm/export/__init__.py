"""Export an adapter to where models run: llama.cpp (GGUF), Ollama, vLLM, transformers.

The engine knows nothing of documents: each writer takes a peft adapter folder (as
the store keeps it under `adapter/versions/vNNNN/`) and a `BaseSpec`.

    dlm.export.adapter     AdapterInfo, read_adapter, refusal rules per format
    dlm.export.formats     write_gguf, write_ollama, write_merged, write_peft
    dlm.export.merged_gguf write_gguf_merged (one GGUF of the merged model + Modelfile)
    dlm.export.merge       the merged model (float32 merge, saved as float32/16, bfloat16)
    dlm.export.hf_folder   chat template with the system prompt; configs transformers 4.x reads
    dlm.export.gguf_file   llama.cpp conversion plus normalized metadata
    dlm.export.llamacpp    where llama.cpp's converters are installed; running them
    dlm.export.layout      where each peft tensor lands in a GGUF (for --verify)
    dlm.export.ollama      ChatML chat template -> Modelfile
    dlm.export.publish     staging folder published by rename; what --out may replace
    dlm.export.verify      the --verify checks
"""

from dlm.errors import ExportError, ExportRefused
from dlm.export.adapter import FORMATS, AdapterInfo, read_adapter, refusals
from dlm.export.formats import BaseSpec, Written, write_gguf, write_merged, write_ollama, write_peft
from dlm.export.merged_gguf import write_gguf_merged
from dlm.export.verify import VerifyResult

__all__ = [
    "FORMATS",
    "AdapterInfo",
    "BaseSpec",
    "ExportError",
    "ExportRefused",
    "VerifyResult",
    "Written",
    "read_adapter",
    "refusals",
    "write_gguf",
    "write_gguf_merged",
    "write_merged",
    "write_ollama",
    "write_peft",
]

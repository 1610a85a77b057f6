"""The GGUF LoRA adapter `dlm export --format gguf` writes.

Tensors come from llama.cpp's own converter (`dlm.export.llamacpp`): float32
`blk.N.<tensor>.weight.lora_a` `[r, n_in]` and `.lora_b` `[n_out, r]` (numpy order),
with llama.cpp's rope row order for `attn_q`/`attn_k` on Llama models.

The key/value metadata is then rewritten from a fixed list, in a fixed order, so the
same adapter gives the same bytes wherever it was exported from (the converter
otherwise writes folder names, paths and a model card's fields):

    general.architecture            from the converter (e.g. "llama")
    general.type                    "adapter"
    general.name                    "<base name> LoRA adapter"
    general.base_model.count        1
    general.base_model.0.name       the base model's name (an alias or a folder's last part)
    adapter.type                    "lora"
    adapter.lora.alpha              float32; llama.cpp scales each tensor by alpha / rank
    adapter.*                       any other adapter key the converter wrote, as written
    general.quantization_version    as written

Tensor data and order are copied unchanged.
"""

from __future__ import annotations

from pathlib import Path

from dlm.errors import ExportError

GGUF_NAME = "adapter.gguf"
_FIXED = ("general.architecture", "general.type", "general.name", "adapter.type", "adapter.lora.alpha")


def normalize_gguf(src: Path, dst: Path, *, base_name: str, alpha: float) -> None:
    """Write `src`'s tensors to `dst` with the metadata of the module docstring.

    Raises:
        ExportError: `src` is not a GGUF LoRA adapter or holds a tensor type other
            than F32/F16 (the converter is always asked for F32).
    """
    import numpy as np
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

    reader = GGUFReader(src)
    fields = {name: field for name, field in reader.fields.items() if not name.startswith("GGUF.")}
    if "general.architecture" not in fields or fields.get("adapter.type") is None:
        raise ExportError(f"{src}: not a GGUF LoRA adapter (no general.architecture / adapter.type)")
    writer = GGUFWriter(dst, arch=str(fields["general.architecture"].contents()))
    writer.add_type("adapter")
    writer.add_name(f"{base_name} LoRA adapter")
    writer.add_uint32("general.base_model.count", 1)
    writer.add_string("general.base_model.0.name", base_name)
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", float(alpha))
    for name, field in fields.items():
        if name.startswith("adapter.") and name not in _FIXED:
            sub = field.types[1] if field.types[0] == GGUFValueType.ARRAY else None
            writer.add_key_value(name, field.contents(), field.types[0], sub)
    if "general.quantization_version" in fields:
        writer.add_uint32("general.quantization_version", int(fields["general.quantization_version"].contents()))
    for tensor in reader.tensors:
        if tensor.tensor_type not in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            raise ExportError(f"{src}: tensor {tensor.name} is {tensor.tensor_type.name}; expected F32")
        writer.add_tensor(tensor.name, np.array(tensor.data), raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def export_gguf(adapter_dir: Path, base_config: Path, out_file: Path, *, base_name: str, alpha: float) -> None:
    """Convert (llama.cpp) then normalize (see module docstring) into `out_file`.

    Args:
        adapter_dir: peft LoRA folder.
        base_config: the base model's `config.json` (all the converter reads of it).
        out_file: destination, normally inside a staging folder (`dlm.export.publish`).
        base_name: written as `general.base_model.0.name`.
        alpha: `adapter.lora.alpha` (`AdapterInfo.gguf_alpha()`).

    Raises:
        ExportError: the converter is missing or fails.
    """
    raw = out_file.with_name(out_file.name + ".raw")
    try:
        from dlm.export.llamacpp import convert_lora

        convert_lora(adapter_dir, base_config, raw)
        normalize_gguf(raw, out_file, base_name=base_name, alpha=alpha)
    finally:
        raw.unlink(missing_ok=True)

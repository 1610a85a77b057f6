"""Where each peft LoRA tensor lands in a GGUF adapter, written independently of the
converter so `--verify` can check its output.

For a peft tensor `base_model.model.<hf module>.lora_A.weight` `[r, n_in]` and
`.lora_B.weight` `[n_out, r]` (float32):

- the GGUF name is `gguf.TensorNameMap(arch, n_layers)`'s name for `<hf module>`
  plus `.weight.lora_a` / `.weight.lora_b`;
- `lora_a` is `lora_A` unchanged;
- `lora_b` is `lora_B`, except for Llama-family `q_proj` / `k_proj`: Hugging Face
  keeps each head's rotary pairs as two halves (`rotate_half`), llama.cpp as
  adjacent rows, so each head's rows are reordered from `[x0..x(d/2-1), y0..]` to
  `[x0, y0, x1, y1, ...]` (heads: `num_attention_heads` for q, `num_key_value_heads`
  for k). `A` is untouched because the reordering acts on output rows only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ROPE_PERMUTED_ARCHS = ("llama",)


def rope_rows(rows: Any, n_head: int) -> Any:
    """Reorder the output rows of `rows` `[n_out, k]` from HF's half-split rotary
    layout to llama.cpp's interleaved one (module docstring)."""
    n_out = rows.shape[0]
    head_dim = n_out // n_head
    split = rows.reshape(n_head, 2, head_dim // 2, *rows.shape[1:])
    return split.swapaxes(1, 2).reshape(rows.shape)


def expected_gguf_tensors(adapter_weights: Path, config: dict[str, Any]) -> dict[str, Any]:
    """The GGUF tensors (name -> float32 numpy array, numpy order) an exact converter
    writes for `adapter_weights` on a base with HF `config` (module docstring).

    Raises:
        KeyError: a module has no GGUF name for this architecture.
    """
    import gguf
    from safetensors.numpy import load_file

    model_type = str(config.get("model_type"))
    arch = next(a for a, name in gguf.MODEL_ARCH_NAMES.items() if name == model_type)
    names = gguf.TensorNameMap(arch, int(config["num_hidden_layers"]))
    n_head = int(config["num_attention_heads"])
    n_kv = int(config.get("num_key_value_heads") or n_head)
    out: dict[str, Any] = {}
    for key, value in load_file(str(adapter_weights)).items():
        module, _, kind = key.removeprefix("base_model.model.").rpartition(".lora_")
        target = names.get_name(module + ".weight", try_suffixes=(".weight",))
        if target is None:
            raise KeyError(f"{module}: no GGUF tensor name for architecture {model_type}")
        tensor = value.astype("float32")
        if kind.startswith("B") and model_type in ROPE_PERMUTED_ARCHS:
            if module.endswith("q_proj"):
                tensor = rope_rows(tensor, n_head)
            elif module.endswith("k_proj"):
                tensor = rope_rows(tensor, n_kv)
        out[f"{target}.lora_{kind[0].lower()}"] = tensor
    return out

"""The null adapter: random LoRA weights with the trained adapter's per-module norms.

A trained adapter changes the model; so does any adapter of the same size. To report a
gain against noise rather than against zero, every evaluation also scores a null
adapter: for each LoRA matrix (`lora_A`, `lora_B` of every adapted module) a Gaussian
matrix of the same shape, scaled to the trained matrix's Frobenius norm. Its seed is
the run's seed, mixed per matrix with the xxh64 of the matrix's name, so the null
adapter of an adapter is the same on every machine and independent of module order.
"""

from __future__ import annotations

from typing import Any

import xxhash

NULL_ADAPTER = "dlm-null"


def null_state(trained: dict[str, Any], seed: int) -> dict[str, Any]:
    """Random tensors shaped and normed like `trained` (name -> float tensor).

    Returns:
        name -> float32 tensor of the same shape with the same Frobenius norm (a zero
        matrix stays zero: `lora_B` before any step).
    """
    import torch

    out = {}
    for name in sorted(trained):
        tensor = trained[name].detach().float().cpu()
        generator = torch.Generator().manual_seed(
            (seed * 1_000_003 + xxhash.xxh64_intdigest(name.encode("utf-8"))) % 2**63
        )
        noise = torch.randn(tensor.shape, generator=generator, dtype=torch.float32)
        norm = float(tensor.norm())
        out[name] = noise * (norm / float(noise.norm())) if norm > 0 else torch.zeros_like(tensor)
    return out


def add_null_adapter(peft_model: Any, seed: int, trained_name: str = "default") -> str:
    """Add the null adapter of `trained_name` to `peft_model` (a peft `PeftModel`) and
    return its name; the active adapter is left as it was.

    Raises:
        KeyError: the model has no adapter `trained_name`.
    """
    from peft import get_peft_model_state_dict, set_peft_model_state_dict

    config = peft_model.peft_config[trained_name]
    # dlm's LoRA never targets the embeddings; "auto" would look for the base's config.json
    # under the adapter's base-model name (an alias) and warn on the user's terminal
    trained = get_peft_model_state_dict(peft_model, adapter_name=trained_name, save_embedding_layers=False)
    active = peft_model.active_adapter
    if NULL_ADAPTER not in peft_model.peft_config:
        peft_model.add_adapter(NULL_ADAPTER, config)
    set_peft_model_state_dict(peft_model, null_state(trained, seed), adapter_name=NULL_ADAPTER)
    peft_model.set_adapter(active)
    return NULL_ADAPTER

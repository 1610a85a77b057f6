"""A seeded, tiny Llama for tests that need a real causal LM but not real weights."""

from __future__ import annotations

from typing import Any

import torch

SMALLEST = {
    "hidden_size": 16,
    "intermediate_size": 32,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "max_position_embeddings": 32,
}


def tiny_llama(vocab_size: int = 64, *, seed: int = 0, **config: Any) -> torch.nn.Module:
    """A `LlamaForCausalLM` of `SMALLEST` with `config` over it, its weights drawn after
    `torch.manual_seed(seed)`."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab_size, **{**SMALLEST, **config}))

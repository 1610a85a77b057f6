"""Fixtures shared by the judge's tests."""

from __future__ import annotations

import pytest
import torch
from tinyllama import tiny_llama


@pytest.fixture(scope="module")
def tiny_lora(smollm2_tokenizer):
    """A seeded two-layer Llama with SmolLM2's vocabulary and a LoRA adapter (r 2 on
    `q_proj`, `v_proj`) whose B is not zero, so the adapter changes the scores."""
    from peft import LoraConfig, get_peft_model

    base = tiny_llama(
        len(smollm2_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
    )
    model = get_peft_model(base, LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.5)
    return model

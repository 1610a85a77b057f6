"""A stand-in causal LM whose held-out loss is known exactly: ln(vocab)."""

from __future__ import annotations

from typing import Any

import torch


class Logits:
    """What a causal LM's forward returns, as far as `heldout_loss` reads it."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits


class UniformLM(torch.nn.Module):
    """Every next token equally likely among `vocab`: the loss is ln(vocab) exactly.
    `calls` counts forward passes."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab, self.calls = vocab, 0
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids: Any, attention_mask: Any) -> Logits:
        self.calls += 1
        return Logits(torch.zeros(*input_ids.shape, self.vocab))

"""Stand-in causal LMs whose losses are known exactly, with the surface of a transformers
causal LM that `dlm.train.lm_loss` reads: a decoder whose output has `last_hidden_state`,
an LM head (`get_output_embeddings`) and `logits_to_keep`. The hidden states are the
logits themselves and the LM head is the identity, frozen."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch


class Logits:
    """What a causal LM's forward returns, as far as the scoring reads it."""

    def __init__(self, logits: torch.Tensor) -> None:
        self.logits = logits


class _Decoder(torch.nn.Module):
    def __init__(self, logits_of: Any) -> None:
        super().__init__()
        self.logits_of = logits_of

    def forward(self, input_ids: Any) -> SimpleNamespace:
        return SimpleNamespace(last_hidden_state=self.logits_of(input_ids))


class LogitsLM(torch.nn.Module):
    """A causal LM defined by `logits(input_ids) -> [B, T, vocab]`."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.decoder = _Decoder(self.logits)
        self.head = torch.nn.Linear(vocab, vocab, bias=False)
        self.head.weight.data.copy_(torch.eye(vocab))
        self.head.weight.requires_grad_(False)

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def get_decoder(self) -> torch.nn.Module:
        return self.decoder

    def get_output_embeddings(self) -> torch.nn.Module:
        return self.head

    def forward(self, input_ids: Any, attention_mask: Any = None, logits_to_keep: int = 0, **_: Any) -> Logits:
        hidden = self.decoder(input_ids).last_hidden_state
        return Logits(self.head(hidden[:, -logits_to_keep:] if logits_to_keep else hidden))


class UniformLM(LogitsLM):
    """Every next token equally likely among `vocab`: the loss is ln(vocab) exactly.
    `calls` counts forward passes."""

    def __init__(self, vocab: int) -> None:
        super().__init__(vocab)
        self.calls = 0
        self.w = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids: Any, attention_mask: Any = None, logits_to_keep: int = 0, **kw: Any) -> Logits:
        self.calls += 1
        return super().forward(input_ids, attention_mask, logits_to_keep, **kw)

    def logits(self, input_ids: torch.Tensor) -> torch.Tensor:
        return torch.zeros(*input_ids.shape, self.vocab)

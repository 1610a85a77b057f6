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


def token_rows(rows: list[list[int]], kinds: list[str] | None = None, n_prompt: list[int] | None = None) -> Any:
    """`rows` (token ids) as the `TokenizedRows` the training datasets read."""
    import numpy as np

    from dlm.tokenize.seam import TokenizedRows

    arrays = [np.asarray(r, dtype=np.uint16) for r in rows]
    return TokenizedRows(
        lengths=np.array([len(r) for r in rows], np.int64),
        n_prompt=np.array(n_prompt or [0] * len(rows), np.int32),
        keys=[f"row{i}" for i in range(len(rows))],
        read=lambda i: arrays[i],
        kinds=list(kinds or ["prose"] * len(rows)),
    )


def tiny_hyper(**changes: Any) -> Any:
    """The hyperparameters of the tiny runs: LoRA r 4 on q and v, 2 steps of 2 examples."""
    from dataclasses import replace

    from dlm.train.lora import Hyperparameters

    base = Hyperparameters(4, 8, 0.0, ("q_proj", "v_proj"), 1e-2, 2, 1.0, 2, 1, 7)
    return replace(base, **changes)


def train_tiny(
    rows: list[list[int]],
    *,
    sink: Any = None,
    measurements: Any = (),
    kinds: list[str] | None = None,
    n_prompt: list[int] | None = None,
    packing: bool = False,
    sequence_len: int = 12,
    vocab: int = 64,
    model_seed: int = 0,
    **run: Any,
) -> Any:
    """Train a fresh tiny Llama through `dlm.train.loop.train` on `rows`; `run` sets
    `LoopRun` fields (`hyper`, `rank`, `world_size`, `checkpoints`, `every`, ...)."""
    from types import SimpleNamespace

    import numpy as np

    from dlm.train.data import KINDS
    from dlm.train.dataset import build_dataset
    from dlm.train.loop import LoopRun, train

    tokenized = token_rows(rows, kinds, n_prompt)
    dataset = build_dataset(tokenized, sequence_len, packing)
    loop_run = LoopRun(
        hyper=run.pop("hyper", tiny_hyper()),
        dataset=dataset,
        row_kinds=np.array([KINDS.index(k) for k in tokenized.kinds], np.int64),
        sequence_len=sequence_len,
        pad_id=0,
        **run,
    )
    sink = sink or SimpleNamespace(on_train_start=lambda total: None, on_step=lambda *args: None)
    return train(tiny_llama(vocab, seed=model_seed, max_position_embeddings=64), loop_run, sink, measurements)


def assert_same_grads(model: torch.nn.Module, a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> None:
    """`a.sum()` and `b.sum()`, two outputs of `model`, give the same gradient to each of
    its trainable parameters (at least one), within `rtol` and `atol`."""
    grads = []
    for out in (a, b):
        model.zero_grad(set_to_none=True)
        out.sum().backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name, grad in grads[0].items():
        assert torch.allclose(grads[1][name], grad, rtol=rtol, atol=atol), name

"""Replay rows trained toward the base model's whole next-token distribution.

Replay rows (`dlm.rows.replay`) hold the base model's own greedy answers to general
prompts. Trained by cross-entropy (`training.replay_loss: ce`), they pull the adapter
toward the base's likeliest token at each position, which it predicts already: the
pull is weak, and it sharpens the distribution. With `kl`, each replay position that
carries loss is trained instead on the forward KL divergence from the base model's
distribution `q` to the adapter's `p`, over the whole vocabulary, at temperature 1:

    KL(q || p) = sum_v q(v) (log q(v) - log p(v))

the cross-entropy against the base's full next-token distribution less its entropy,
the distillation loss of Hinton, Vinyals and Dean (2015), "Distilling the Knowledge in
a Neural Network". Its gradient with respect to the adapter's logits is `p - q`: 0 while
the adapter equals the base (LoRA's B is 0 at initialization), so the term only pulls
back what the document's rows moved.

`q` comes from the same model with the LoRA adapter off (`AdapterOff`: each peft LoRA
layer's `enable_adapters(False)`, what peft's `disable_adapter()` does, without its
walks over the whole model on every call), under `torch.no_grad()`, inside the loop's
autocast, with every module in eval mode (no dropout in the target). With the adapter
off no LoRA dropout runs, so the keyed dropout's clock (`dlm.train.dropout`) is neither
read nor moved: the adapter's own forward draws the masks it draws with `ce`.

Cost: only micro-batches with replay positions pay for the base pass, and it runs on
their examples that hold replay positions alone (`base_pass`, on the host: the rows
that hold them, or, of one row of several examples, the shared prefix and the replay
examples' tails; packed blocks keep replay rows in blocks of their own,
`dlm.train.dataset`). With the fused
loss (`dlm.train.lm_loss`) the logits of both models exist only at the replay
positions, `KL_CHUNK_ROWS` rows `[c, V]` at a time, and the gradient with respect to
the adapter's hidden states, `(p - q) @ W`, is computed in the same pass.

The KL takes the NLL's place at those positions in the `[B, T]` per-token tensor the
model returns, so the loop's loss sum, its divisor (the step's loss tokens) and the
per-kind sums (bucket `replay`, which then reads in nats of KL) are unchanged, and
nothing new is synchronized across ranks: each rank's base pass is its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from dlm.train.data import BASE, KINDS, Batch
from dlm.train.row_blocks import row_blocks

REPLAY = KINDS.index("replay")
FEATURES = ("input_ids", "attention_mask", "position_ids")  # what the decoder reads of a batch
# rows of logits per piece: each piece holds about five [c, V] float32 buffers (SmolLM2:
# 197 KB a row), about 63 MB at 64 rows
KL_CHUNK_ROWS = 64


def replay_inputs(batch: Batch) -> dict[str, torch.Tensor]:
    """The model's inputs for `batch` with its replay positions scored by KL.

    Returns:
        `batch.inputs` where no position's loss is of kind `replay`; otherwise a copy
        whose `loss_rows` leaves them out, with int64 `replay_rows` [n] (those flat
        positions of the [B, T] micro-batch), the base pass's inputs under `BASE`-prefixed
        names (`base_pass`) and int64 `replay_at` [n], each replay row's flat position in
        the base pass's output.
    """
    rows = batch.inputs["loss_rows"]
    is_replay = batch.kinds[rows] == REPLAY
    if not bool(is_replay.any()):
        return batch.inputs
    replay_rows = rows[is_replay]
    base, at = base_pass(batch, replay_rows)
    return {
        **batch.inputs,
        "loss_rows": rows[~is_replay],
        "replay_rows": replay_rows,
        "replay_at": at,
        **{BASE + k: v for k, v in base.items()},
    }


def base_pass(batch: Batch, replay_rows: torch.Tensor) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """What the base model reads to score `replay_rows` (flat positions of the batch), and
    where each of them sits in its output: the rows holding replay positions, of a
    batch of several rows; of one row of several examples
    (`dlm.train.shared_prefix.collate_row`), the shared prefix and the tails holding
    replay positions, with the row's positions and its mask restricted to them (each tail
    still sees exactly the prefix and itself), and that row's attention blocks where they
    pay (`dlm.train.row_blocks`).

    Returns:
        (the decoder's inputs: `input_ids` [m, T'], and `attention_mask` and/or
        `position_ids`; int64 [n], flat positions of [m, T']).
    """
    inputs = batch.inputs
    if batch.segments is None:
        width = inputs["input_ids"].shape[1]
        examples = torch.unique(replay_rows // width)
        base = {k: inputs[k][examples] for k in FEATURES if k in inputs}
        return base, torch.searchsorted(examples, replay_rows // width) * width + replay_rows % width
    segments = batch.segments
    kept = torch.nonzero((segments == 0) | torch.isin(segments, segments[replay_rows])).flatten()
    base = {
        "input_ids": inputs["input_ids"][:, kept],
        "position_ids": inputs["position_ids"][:, kept],
        "attention_mask": inputs["attention_mask"][:, :, kept][:, :, :, kept],
        **(row_blocks(segments[kept].numpy()) or {}),
    }
    return base, torch.searchsorted(kept, replay_rows)


class AdapterOff:
    """A context that runs a peft model as its base model: every LoRA layer off
    (`enable_adapters(False)`) and every module in eval mode, each put back after. The
    layers and modules are listed once, when made: make it after the model's last change
    (`dlm.train.model.prepare_model`)."""

    def __init__(self, peft_model: torch.nn.Module) -> None:
        from peft.tuners.tuners_utils import BaseTunerLayer

        self.modules = list(peft_model.modules())
        self.layers = [m for m in self.modules if isinstance(m, BaseTunerLayer)]

    @contextmanager
    def __call__(self) -> Iterator[None]:
        modes = [m.training for m in self.modules]
        assert not any(layer.disable_adapters for layer in self.layers)  # it turns them all back on
        for layer in self.layers:
            layer.enable_adapters(False)
        for module in self.modules:
            module.training = False
        try:
            yield
        finally:
            for module, training in zip(self.modules, modes, strict=True):
                module.training = training
            for layer in self.layers:
                layer.enable_adapters(True)  # and its LoRA weights take gradients again


def replay_kl(
    adapter_off: AdapterOff,
    decoder: Any,
    base_inputs: dict[str, torch.Tensor],
    adapter_out: torch.Tensor,
    rows: torch.Tensor,
    at: torch.Tensor,
    weight: torch.Tensor | None,
) -> torch.Tensor:
    """KL(q_base || p_adapter) at the replay positions `rows` (module docstring).

    Args:
        adapter_off: the peft model's `AdapterOff`.
        decoder: what made `adapter_out` from `features`: the decoder (fused loss, then
            `weight` is the LM head's) or the whole causal LM (logits, `weight` None).
        base_inputs: what the base pass reads (`base_pass`): `input_ids` [m, T'] and
            its `attention_mask` and/or `position_ids`.
        adapter_out: float [B, T, D], the adapter's final hidden states (D = H) or
            logits (D = V), with its graph.
        rows: int64 [n], flat positions of [B, T] (`replay_inputs`).
        at: int64 [n], the same positions' flat places in the base pass's [m, T'].

    Returns:
        float32 [n], nats, differentiable with respect to `adapter_out`.
    """
    with torch.no_grad(), adapter_off():
        out = decoder(**base_inputs, use_cache=False)
        base = out.last_hidden_state if weight is not None else out.logits  # [m, T', D]
    target = base.reshape(-1, base.shape[-1])[at]
    mine = adapter_out.reshape(-1, adapter_out.shape[-1])[rows]
    if weight is None:
        log_q = target.float().log_softmax(dim=-1)
        return (log_q.exp() * (log_q - mine.float().log_softmax(dim=-1))).sum(dim=-1)
    return fused_kl(mine, target, weight)


def fused_kl(hidden: torch.Tensor, base: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """KL(softmax(base W^T) || softmax(hidden W^T)) row by row, without keeping logits.

    Args:
        hidden: float [n, H], the adapter's final hidden states (the gradient flows back
            through it).
        base: float [n, H], the base model's at the same positions (no gradient).
        weight: float [V, H], the frozen LM head.

    Returns:
        float32 [n], nats. Under autocast the LM-head products run in its dtype and the
        softmaxes in float32, as in `dlm.train.lm_loss.token_nll`.
    """
    device = hidden.device.type
    dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else hidden.dtype
    return _FusedHeadKL.apply(hidden, base.detach(), weight, dtype)


class _FusedHeadKL(torch.autograd.Function):
    @staticmethod
    def forward(
        ctx: Any, hidden: torch.Tensor, base: torch.Tensor, weight: torch.Tensor, dtype: torch.dtype
    ) -> torch.Tensor:
        n = hidden.shape[0]
        kl = torch.zeros(n, dtype=torch.float32, device=hidden.device)
        grad = torch.zeros_like(hidden) if ctx.needs_input_grad[0] else None
        with torch.autocast(hidden.device.type, enabled=False):
            w = weight.to(dtype)
            pieces = -(-n // KL_CHUNK_ROWS)
            for at in torch.tensor_split(torch.arange(n, device=hidden.device), max(pieces, 1)):
                log_p = torch.mm(hidden[at].to(dtype), w.T).float().log_softmax(dim=1)  # [c, V]
                log_q = torch.mm(base[at].to(dtype), w.T).float().log_softmax(dim=1)
                q = log_q.exp()
                kl[at] = (q * (log_q - log_p)).sum(dim=1)
                if grad is not None:
                    grad[at] = ((log_p.exp_() - q).to(dtype) @ w).to(grad.dtype)  # d KL / d hidden
        ctx.save_for_backward(grad if grad is not None else hidden.new_zeros(0))
        return kl

    @staticmethod
    def backward(ctx: Any, grad_kl: torch.Tensor) -> tuple[Any, ...]:
        (grad,) = ctx.saved_tensors
        return grad * grad_kl[:, None].to(grad.dtype), None, None, None


def weigh_replay(nll: torch.Tensor, kinds: torch.Tensor, weight: float) -> torch.Tensor:
    """float32 [B, T] `nll` with each position whose loss is of kind `replay` multiplied by
    `weight` (`training.replay_weight`), the others as they are; `nll` itself at 1.

    Args:
        kinds: int64 [B * T], each position's `KINDS` index (`Batch.kinds`), on `nll`'s device.
    """
    if weight == 1.0:
        return nll
    factor = torch.where(kinds == REPLAY, weight, 1.0).to(nll.dtype)
    return nll * factor.view(nll.shape)


def put_kl(nll: torch.Tensor, rows: torch.Tensor, kl: torch.Tensor) -> torch.Tensor:
    """float32 [B, T] `nll` with `kl` [n] in place of its values at the flat positions
    `rows` [n]; their NLL, if any, takes no gradient."""
    return nll.reshape(-1).index_put((rows,), kl).view(nll.shape)

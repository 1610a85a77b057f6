"""One bfloat16 copy of a layer input that several LoRA A matrices read, under autocast.

In a transformer layer three projections read the same normed hidden states (q, k, v)
and two more read the MLP's input (gate, up). Under bfloat16 autocast each LoRA A
matrix casts its float32 input to bfloat16 and keeps that copy for its weight's
gradient, so the same values are kept three times and twice over (SmolLM2-135M: 576
wide, 30 layers, LoRA on every linear), a share of what is alive at a bf16 step's memory
peak (docs/benchmarks.md, "Shared LoRA input casts").

`share_lora_input_casts` puts a forward pre-hook on every LoRA A linear of a peft
model. While bfloat16 autocast is on and gradients are recorded, the hook casts
its float32 input once and hands each A matrix that reads the same tensor (same object,
same version) a view of that one copy, through `_SharedCast`, whose backward returns
the incoming bfloat16 gradient cast to float32, as autocast's own cast does. Each
reader's gradient reaches the float32 input on its own and is summed there in float32,
as before, so the LoRA gradients are the same bits (tests/test_backward_memory.py); only
the copies are gone. With LoRA dropout on, each A matrix reads its own masked tensor
and nothing is shared. Float32 runs, evaluation under `torch.no_grad()` and inputs
already in bfloat16 pass through untouched.

The frozen base linears read the same tensors and autocast casts for them too, one copy
each, freed after the product (their weights take no gradient, so nothing is kept): the
hook serves them the same copy, which takes five casts and five [tokens, 576] bfloat16
temporaries (q, k, v, gate, up) out of every SmolLM2 layer's forward. And peft casts a
bfloat16 input up to its LoRA weights' float32 before A reads it (`down_proj`, which
reads the gated MLP's bfloat16 product), which autocast then casts straight back: two
casts and a [tokens, 1,536] float32 temporary a layer. `share_lora_input_casts` turns
that cast off for the model's LoRA layers without dropout (peft's
`cast_input_dtype_enabled`; a dropout mask is applied in the input's dtype, so with
dropout on the cast stays): A then reads the bfloat16 input as it is, the same values
autocast would have rounded back to. Both keep the gradients the same bits: bfloat16 to
float32 and back is exact, and every reader still has a cast node of its own, made where
autocast made it. In all, a bf16 step's forward allocates less and keeps the same
tensors for backward (docs/benchmarks.md, "Shared LoRA input casts").
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from torch import nn


class _SharedCast(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, low: torch.Tensor) -> torch.Tensor:
        ctx.dtype = x.dtype
        return low.view_as(low)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad.to(ctx.dtype), None


class _LastCast:
    """The latest float32 input cast (a weak reference to it, its version, the copy)."""

    def __init__(self) -> None:
        self.source: weakref.ref[torch.Tensor] | None = None
        self.version = -1
        self.low: torch.Tensor | None = None

    def of(self, x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """The `dtype` copy of `x`, made once while `x` is unchanged."""
        if self.low is None or self.source is None or self.source() is not x or self.version != x._version:
            self.source, self.version = weakref.ref(x), x._version
            self.low = x.detach().to(dtype)
        return self.low


def share_lora_input_casts(model: nn.Module) -> int:
    """Give every LoRA A linear of the peft model `model`, and the frozen base linear of
    each LoRA layer, the shared-cast pre-hook, and turn off peft's input cast on the LoRA
    layers (module docstring); returns how many linears got the hook. Call once per
    model, in a bfloat16 run."""
    last = _LastCast()

    def hook(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...] | None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or x.dtype != torch.float32 or not torch.is_grad_enabled():
            return None
        device = x.device.type
        if not torch.is_autocast_enabled(device) or torch.get_autocast_dtype(device) != torch.bfloat16:
            return None
        return (_SharedCast.apply(x, last.of(x, torch.bfloat16)), *args[1:])

    hooked = 0
    for module in model.modules():
        readers = getattr(module, "lora_A", None)
        if not isinstance(readers, nn.ModuleDict):
            continue
        masks = getattr(module, "lora_dropout", {})
        if all(isinstance(dropout, nn.Identity) for dropout in masks.values()):
            # with dropout on, the mask is applied in the input's dtype: keep peft's cast
            setattr(module, "cast_input_dtype_enabled", False)  # noqa: B010 (mypy types attributes of nn.Module as Tensor | Module)
        base = getattr(module, "base_layer", None)
        for linear in [base, *readers.values()]:
            if isinstance(linear, nn.Linear):
                linear.register_forward_pre_hook(hook)
                hooked += 1
    return hooked

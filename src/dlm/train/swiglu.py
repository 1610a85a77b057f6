"""The gated MLP's product `silu(gate) * up` without keeping `silu(gate)` for backward.

Llama-family MLPs compute `down_proj(silu(gate_proj(x)) * up_proj(x))`. Autograd keeps
`gate` for the SiLU's backward, and `silu(gate)` and `up` for the product's: three
[tokens, intermediate] tensors a layer, among the largest a forward keeps (SmolLM2-135M:
1,536 wide, 30 layers; `silu(gate)` alone is tokens x 1,536 x 30 elements, 2 bytes each
under bf16 autocast, 4 in float32). `_SiluMul` keeps `gate` and `up` only and
computes `silu(gate)` again in backward, an elementwise pass over one tensor. The
backward is autograd's own formulas in the same order (the product's two gradients,
then `silu_backward`), so every gradient is the same bits as before, in float32 and
under autocast alike (tests/test_backward_memory.py).

`recompute_silu_products` swaps the forward of every such MLP in a model (a module
with `gate_proj`, `up_proj`, `down_proj` and a SiLU `act_fn`); any other module is left
alone.
"""

from __future__ import annotations

import types
from typing import Any

import torch
from torch import nn

_SILU_TYPES = ("SiLU", "SiLUActivation")  # torch's and transformers' SiLU modules


class _SiluMul(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(gate, up)
        return torch.nn.functional.silu(gate) * up

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        gate, up = ctx.saved_tensors
        grad_gate = grad_up = None
        if ctx.needs_input_grad[1]:
            grad_up = grad * torch.nn.functional.silu(gate)
        if ctx.needs_input_grad[0]:
            grad_gate = torch.ops.aten.silu_backward(grad * up, gate)
        return grad_gate, grad_up


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """`silu(gate) * up`, keeping only `gate` and `up` for backward.

    Args:
        gate, up: float [..., intermediate], the same shape and dtype.

    Returns:
        [..., intermediate] in their dtype.
    """
    return _SiluMul.apply(gate, up)


def _gated_forward(self: Any, x: torch.Tensor) -> torch.Tensor:
    return self.down_proj(silu_mul(self.gate_proj(x), self.up_proj(x)))


def is_silu_mlp(module: nn.Module) -> bool:
    """A Llama-family gated MLP: `gate_proj`, `up_proj`, `down_proj` and a SiLU `act_fn`."""
    act = getattr(module, "act_fn", None)
    return (
        all(hasattr(module, name) for name in ("gate_proj", "up_proj", "down_proj"))
        and type(act).__name__ in _SILU_TYPES
    )


def recompute_silu_products(model: nn.Module) -> int:
    """Give every `is_silu_mlp` module of `model` the forward above (idempotent); returns
    how many modules it now covers."""
    covered = 0
    for module in model.modules():
        if is_silu_mlp(module):
            module.forward = types.MethodType(_gated_forward, module)
            covered += 1
    return covered

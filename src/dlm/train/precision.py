"""Training precision: `training.precision` (`fp32`, `bf16`, `auto`) resolved for a machine.

`bf16` trains the LoRA step under bfloat16 autocast (matmuls and attention in bfloat16,
the weights, the adapter, its optimizer state and the loss reduction in float32) through
the training loop's own `torch.autocast` (`dlm.train.loop`), on a CUDA GPU and on a CPU
alike; a CPU's bfloat16 matmuls run on oneDNN's AVX512-BF16 or AMX kernels where it has
them.
Without those instructions bfloat16 is emulated and slower than float32, so `auto` picks:

    CUDA GPU that supports bfloat16              bfloat16
    CUDA GPU without it (pre-Ampere)             float32
    CPU with avx512_bf16 or amx_bf16 (Linux)     bfloat16 (float32 with DLM_CPU_BF16=0)
    anything else (other CPUs, MPS, no flags)    float32

Where the CPU has them, bfloat16 steps are faster than float32 ones with the held-out
loss within run-to-run noise (docs/benchmarks.md, "bfloat16 against float32 training on
a CPU").
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from dlm.cpu_isa import read_cpu_flags

Setting = Literal["fp32", "bf16", "auto"]
DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16"}
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# `DLM_CPU_BF16=0`: `auto` treats this CPU as one without bfloat16 instructions, so a
# bf16 machine trains as most laptops and CI machines do (float32)
CPU_BF16_ENV = "DLM_CPU_BF16"


@dataclass(frozen=True)
class PrecisionSupport:
    """What this machine offers (`dlm doctor` shows it).

    Attributes:
        device: `cuda`, `mps` or `cpu`, where training runs.
        cuda_bf16: a CUDA GPU that supports bfloat16 is present.
        cpu_bf16_flags: the CPU flags of `CPU_BF16_FLAGS` this CPU has (Linux only).
        auto: the dtype name `precision: auto` resolves to here.
    """

    device: str
    cuda_bf16: bool
    cpu_bf16_flags: tuple[str, ...]
    auto: str


def training_device() -> str:
    """Where torch trains on this machine, and so where a run's scoring must run: `cuda`
    (the current CUDA device), else `mps`, else `cpu` (imports torch). The precision `auto`
    resolves to is chosen for this device; scoring a model left on the CPU in a precision
    chosen for a GPU runs the CPU's bfloat16 kernels, which a CPU without AVX512 refuses."""
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    return "mps" if mps is not None and mps.is_available() else "cpu"


def detect_support() -> PrecisionSupport:
    """This machine's `PrecisionSupport` (imports torch; reads /proc/cpuinfo)."""
    import torch

    device = training_device()
    cuda_bf16 = device == "cuda" and bool(torch.cuda.is_bf16_supported())
    cpu_flags = cpu_bf16_flags(read_cpu_flags())
    return PrecisionSupport(device, cuda_bf16, cpu_flags, auto_dtype(device, cuda_bf16, cpu_flags))


def cpu_bf16_flags(flags: frozenset[str], env: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The flags of `CPU_BF16_FLAGS` among `flags`, none when `env` (default: the process's)
    sets `DLM_CPU_BF16=0`."""
    env = os.environ if env is None else env
    if env.get(CPU_BF16_ENV, "").strip() == "0":
        return ()
    return tuple(f for f in CPU_BF16_FLAGS if f in flags)


def auto_dtype(device: str, cuda_bf16: bool, cpu_bf16_flags: tuple[str, ...]) -> str:
    """The dtype name `auto` picks (module docstring table; pure)."""
    if device == "cuda":
        return "bfloat16" if cuda_bf16 else "float32"
    if device == "cpu" and cpu_bf16_flags:
        return "bfloat16"
    return "float32"


def resolve_precision(setting: str, support: PrecisionSupport | None = None) -> str:
    """The dtype name (`float32` or `bfloat16`) a run trains in, for `training.precision`.

    Raises:
        ValueError: `setting` is not `fp32`, `bf16` or `auto` (the schema rules that out).
    """
    if setting == "auto":
        return (support or detect_support()).auto
    if setting not in DTYPE_NAMES:
        raise ValueError(f"unknown precision {setting!r}: expected fp32, bf16 or auto")
    return DTYPE_NAMES[setting]


def hold_frozen_weights(model: Any, precision: str) -> int:
    """In a bfloat16 run, store every frozen `nn.Linear` and `nn.Embedding` weight (and
    bias) of `model` in bfloat16 for the rest of its life, and every other frozen tensor
    in memory of its own; returns the bytes of float32 weights converted.

    Under bfloat16 autocast each linear casts its float32 weight to bfloat16 on every
    forward and keeps that copy for backward, so a float32 model costs its weights
    1.5 times over; cast once ahead, the bits are the same (autocast rounds to nearest
    even, as `Tensor.to` does) and only the bfloat16 copy stays. The same holds for an LM
    head that shares the input embedding's weight (`dlm.train.lm_loss` would cast it per
    micro-batch). A bfloat16 embedding table changes one thing: the looked-up vectors
    are its values rounded to bfloat16, as in any model trained or shipped in bfloat16;
    a forward hook returns them as float32, so the residual stream stays float32 as in a
    float32 model. LoRA's own weights take gradients and stay float32 (peft's rule for
    adapters). The float32 tensors transformers loaded are views of the mapped
    safetensors file: copying the rest too lets the whole mapping go once converted.

    The float32 bits of the converted weights are gone: score or generate in float32
    from a fresh `dlm.models.load_model`, and score this model only under
    `dlm.train.evaluate.scoring_precision`. A float32 `precision` changes nothing.

    Args:
        model: a torch module, typically the peft-wrapped causal LM about to train.
        precision: the run's dtype name (`resolve_precision`).
    """
    import torch

    return _hold(model, precision, (torch.nn.Linear, torch.nn.Embedding), copy_rest=True)


def hold_frozen_embeddings(model: Any, precision: str) -> int:
    """`hold_frozen_weights` for the `nn.Embedding` tables of `model` alone (and an LM head
    that shares one), before peft wraps it: the base model's held-out loss is then scored
    with the lookups its training and its scoring after training use. The linears wait
    for the wrap, which would make LoRA's freshly initialized weights in their dtype.
    Returns the bytes of float32 weights converted."""
    import torch

    return _hold(model, precision, (torch.nn.Embedding,), copy_rest=False)


def _hold(model: Any, precision: str, kinds: tuple[type[Any], ...], copy_rest: bool) -> int:
    """Convert the frozen float32 parameters of `kinds` modules to bfloat16; with
    `copy_rest`, give every other frozen tensor memory of its own."""
    import torch

    if precision != "bfloat16":
        return 0
    owners: list[Any] = [m for m in model.modules() if isinstance(m, kinds)]
    held = {id(t) for m in owners for t in m.parameters(recurse=False)}
    converted = 0
    seen: set[int] = set()
    for module in model.modules():
        for tensor in [*module.parameters(recurse=False), *module.buffers(recurse=False)]:
            if id(tensor) in seen or tensor.requires_grad:
                continue
            seen.add(id(tensor))
            old = tensor.data
            if id(tensor) in held and tensor.dtype == torch.float32:
                converted += tensor.numel() * tensor.element_size()
                tensor.data = old.to(torch.bfloat16)
            elif copy_rest and tensor.dtype != torch.bfloat16:
                tensor.data = old.clone()
        if isinstance(module, torch.nn.Embedding) and module.weight.dtype == torch.bfloat16:
            _float32_lookups(module)
    return converted


def _float32_lookups(embedding: Any) -> None:
    """Make `embedding` (its table held in bfloat16) return float32 vectors (idempotent)."""
    import torch

    if getattr(embedding, "_dlm_float32_lookups", False):
        return
    embedding.register_forward_hook(lambda _module, _args, out: out.to(torch.float32))
    embedding._dlm_float32_lookups = True

"""Training precision: `training.precision` (`fp32`, `bf16`, `auto`) resolved for a machine.

`bf16` trains the LoRA step under bfloat16 autocast (matmuls and attention in bfloat16,
the weights, the adapter, its optimizer state and the loss reduction in float32): on a
CUDA GPU through the Trainer's `bf16` switch, on a CPU through torch's CPU autocast, whose
bfloat16 matmuls run on oneDNN's AVX512-BF16 or AMX kernels where the CPU has them.
Without those instructions bfloat16 is emulated and slower than float32, so `auto` picks:

    CUDA GPU that supports bfloat16              bfloat16
    CUDA GPU without it (pre-Ampere)             float32
    CPU with avx512_bf16 or amx_bf16 (Linux)     bfloat16
    anything else (other CPUs, MPS, no flags)    float32

A bare peft LoRA loop on a 2-core Zen 4 (AVX512-BF16) steps 1.9x faster under bfloat16
autocast than in float32, with the held-out loss within run-to-run noise
(`benchmarks/train_throughput.py`; numbers in docs/determinism.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dlm.cpu_isa import read_cpu_flags

Setting = Literal["fp32", "bf16", "auto"]
DTYPE_NAMES = {"fp32": "float32", "bf16": "bfloat16"}
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")


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


def detect_support() -> PrecisionSupport:
    """This machine's `PrecisionSupport` (imports torch; reads /proc/cpuinfo)."""
    import torch

    cuda = bool(torch.cuda.is_available())
    cuda_bf16 = cuda and bool(torch.cuda.is_bf16_supported())
    mps = getattr(torch.backends, "mps", None)
    device = "cuda" if cuda else "mps" if mps is not None and mps.is_available() else "cpu"
    flags = read_cpu_flags()
    cpu_flags = tuple(f for f in CPU_BF16_FLAGS if f in flags)
    return PrecisionSupport(device, cuda_bf16, cpu_flags, auto_dtype(device, cuda_bf16, cpu_flags))


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

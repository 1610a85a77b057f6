"""Seeding, the determinism switches, and the class of promise `dlm` makes.

Classes (recorded in the lock, reported by `dlm doctor`):

    strong       CUDA with every switch on (deterministic algorithms that raise, not
                 warn, on an op without a deterministic kernel; cuDNN deterministic,
                 no cuDNN autotuning; CUBLAS_WORKSPACE_CONFIG set before CUDA starts):
                 the same inputs on the same tuple give a byte-identical adapter.
    best-effort  MPS and ROCm (kernels whose determinism torch does not guarantee),
                 or CUDA without the full set of switches.
    advisory     CPU, or any tier `dlm` does not know: results are usually identical
                 on one machine, but `dlm` makes no promise across machines.

`planned_flags()` says what `apply_determinism` will set without touching global state,
so `dlm doctor` reports the very class a training run records.
"""

from __future__ import annotations

import os
import random

from dlm.lock.schema import DeterminismClass, DeterminismFlags

CUBLAS_WORKSPACE_CONFIG = ":4096:8"
DETERMINISTIC_CUBLAS_CONFIGS = (":4096:8", ":16:8")


def apply_determinism(seed: int, *, warn_only: bool = False) -> DeterminismFlags:
    """Seed Python, NumPy and torch (all devices) and turn on deterministic kernels.

    Sets `CUBLAS_WORKSPACE_CONFIG` when unset (it only takes effect if CUDA has not
    started yet, so call this before any model is moved to a GPU),
    `torch.use_deterministic_algorithms(True, warn_only=warn_only)`, cuDNN deterministic
    and no cuDNN benchmark. Process-global: affects everything after the call.

    Args:
        seed: the document's training seed (int, >= 0).
        warn_only: let ops without a deterministic kernel run with a warning instead of
            raising; a CUDA run then falls to `best-effort`.

    Returns:
        The flags as read back afterwards (`current_flags()`), which the lock records.
    """
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds every device, CUDA included
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG)
    torch.use_deterministic_algorithms(True, warn_only=warn_only)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    return current_flags()


def current_flags() -> DeterminismFlags:
    """The determinism switches as they are now in this process."""
    import torch

    return make_flags(
        use_deterministic_algorithms=torch.are_deterministic_algorithms_enabled(),
        deterministic_warn_only=torch.is_deterministic_algorithms_warn_only_enabled(),
        cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
        cudnn_benchmark=bool(torch.backends.cudnn.benchmark),
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    )


def planned_flags(*, warn_only: bool = False) -> DeterminismFlags:
    """What `apply_determinism(..., warn_only=warn_only)` will set, computed without side effects."""
    return make_flags(
        use_deterministic_algorithms=True,
        deterministic_warn_only=warn_only,
        cudnn_deterministic=True,
        cudnn_benchmark=False,
        cublas_workspace_config=os.environ.get("CUBLAS_WORKSPACE_CONFIG", CUBLAS_WORKSPACE_CONFIG),
    )


def make_flags(
    *,
    use_deterministic_algorithms: bool,
    deterministic_warn_only: bool,
    cudnn_deterministic: bool,
    cudnn_benchmark: bool,
    cublas_workspace_config: str | None,
) -> DeterminismFlags:
    """Build `DeterminismFlags`, deriving `full_determinism` from the switches."""
    full = (
        use_deterministic_algorithms
        and not deterministic_warn_only
        and cudnn_deterministic
        and not cudnn_benchmark
        and cublas_workspace_config in DETERMINISTIC_CUBLAS_CONFIGS
    )
    return DeterminismFlags(
        use_deterministic_algorithms=use_deterministic_algorithms,
        deterministic_warn_only=deterministic_warn_only,
        cudnn_deterministic=cudnn_deterministic,
        cudnn_benchmark=cudnn_benchmark,
        cublas_workspace_config=cublas_workspace_config,
        full_determinism=full,
    )


def determinism_class(hardware_tier: str, flags: DeterminismFlags) -> DeterminismClass:
    """`strong`, `best-effort` or `advisory` for a tier and the switches set (module docstring)."""
    if hardware_tier == "cuda":
        return "strong" if flags.full_determinism else "best-effort"
    if hardware_tier in ("mps", "rocm"):
        return "best-effort"
    return "advisory"

"""What this machine and Python environment are, as the lock and `dlm doctor` see them.

`dlm.lock.probe` reads the same facts without importing torch (for `dlm doctor`).

Versions come from `importlib.metadata` (the installed distributions, not module
attributes, so a package shadowed on `sys.path` cannot lie). The hardware tier is
the accelerator torch would train on: ROCm builds report through `torch.cuda` with
`torch.version.hip` set, so ROCm is tested before CUDA.
"""

from __future__ import annotations

import importlib.metadata
import platform
from dataclasses import dataclass

from dlm.lock.schema import HardwareTier

PINNED_PACKAGES = (
    "torch",
    "transformers",
    "peft",
    "accelerate",
    "tokenizers",
    "numpy",
)
OPTIONAL_PINNED_PACKAGES = ("bitsandbytes",)


def pinned_versions(path: list[str] | None = None) -> dict[str, str]:
    """`{distribution: version}` for `PINNED_PACKAGES` (missing ones as `"absent"`),
    plus `OPTIONAL_PINNED_PACKAGES` that are installed.

    Args:
        path: folders to look for installed distributions in; None: `sys.path`.
    """
    versions = {name: _version(name, path) or "absent" for name in PINNED_PACKAGES}
    for name in OPTIONAL_PINNED_PACKAGES:
        found = _version(name, path)
        if found is not None:
            versions[name] = found
    return versions


def _version(name: str, path: list[str] | None) -> str | None:
    if path is not None:
        found = next(iter(importlib.metadata.distributions(name=name, path=path)), None)
        return found.version if found is not None else None
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Environment:
    """A snapshot of the machine.

    Attributes:
        hardware_tier: `cpu`, `cuda`, `mps` or `rocm`.
        cuda_version: CUDA torch was built with (`torch.version.cuda`), else None.
        rocm_version: HIP/ROCm torch was built with (`torch.version.hip`), else None.
        cpu_capability: SIMD level torch dispatches to (`AVX2`, `AVX512`, `DEFAULT`, ...).
        torch_threads: intra-op threads (`torch.get_num_threads()`).
        system: `platform.system()` (`Linux`, `Darwin`, `Windows`).
        machine: `platform.machine()` (`x86_64`, `arm64`, ...).
        accelerator: the device name when there is one (`NVIDIA H100 ...`), else None.
        versions: `pinned_versions()`.
    """

    hardware_tier: HardwareTier
    cuda_version: str | None
    rocm_version: str | None
    cpu_capability: str
    torch_threads: int
    system: str
    machine: str
    accelerator: str | None
    versions: dict[str, str]


def capture_environment() -> Environment:
    """Read the current machine (imports torch; no other side effect)."""
    import torch

    tier = detect_hardware_tier()
    accelerator = None
    if tier in ("cuda", "rocm"):
        accelerator = torch.cuda.get_device_name(0)
    elif tier == "mps":
        accelerator = "Apple MPS"
    return Environment(
        hardware_tier=tier,
        cuda_version=torch.version.cuda,
        rocm_version=getattr(torch.version, "hip", None),
        cpu_capability=torch.backends.cpu.get_cpu_capability(),
        torch_threads=torch.get_num_threads(),
        system=platform.system(),
        machine=platform.machine(),
        accelerator=accelerator,
        versions=pinned_versions(),
    )


def detect_hardware_tier() -> HardwareTier:
    """`rocm`, `cuda`, `mps` or `cpu`: the accelerator torch can train on here."""
    import torch

    if torch.cuda.is_available():
        return "rocm" if getattr(torch.version, "hip", None) else "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return "cpu"

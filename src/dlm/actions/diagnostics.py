"""`dlm doctor`: hardware, determinism tier and class, pinned versions.

`doctor()` builds a `DoctorView` without changing any process state; the class it
reports is computed from `planned_flags()` (what `dlm train` will set) with the same
`determinism_class` function the lock uses, so doctor and the lock never disagree.
The machine's facts come from `dlm.lock.probe` (no torch import) unless `ask_torch`,
which asks torch itself as the lock does (`capture_environment`).
"""

from __future__ import annotations

import platform
import sys
from dataclasses import dataclass

from dlm import __version__
from dlm.cpu_isa import IsaState, isa_state, pin_warning
from dlm.lock.determinism import determinism_class, planned_flags
from dlm.lock.environment import Environment, capture_environment
from dlm.lock.probe import probe_environment
from dlm.lock.schema import DeterminismFlags

PROMISES = {
    "strong": "same inputs on this tuple give a byte-identical adapter",
    "best-effort": "deterministic where the kernels allow it; small drift is possible",
    "advisory": "usually identical on this machine; no promise across machines",
}


@dataclass(frozen=True)
class DoctorView:
    """What `dlm doctor` prints (`--json` prints every attribute).

    Attributes:
        dlm_version, python_version: versions of dlm and the interpreter.
        system, machine: OS and CPU architecture.
        hardware_tier: `cpu`, `cuda`, `mps` or `rocm`.
        accelerator: GPU name, or None.
        cuda_version, rocm_version: what torch was built with, or None.
        cpu_capability: SIMD level torch uses (`AVX2`, `AVX512`, ...).
        cpu_isa: the ISA pin's mode and reason (`pinned: ATEN_CPU_CAPABILITY=avx2 set by
            dlm`, `native: ...`; see `dlm.cpu_isa`), plus a warning when it did not take effect.
        torch_threads: intra-op thread count.
        determinism_class: `strong`, `best-effort` or `advisory` (what the lock records).
        promise: one line saying what the class means.
        determinism_flags: the switches `dlm train` sets.
        versions: pinned package versions (`{name: version}`).
        source: where the machine's facts came from: `probe` (read without importing
            torch, `dlm.lock.probe`), `torch` (asked torch) or `given` (the caller's).
        plan: with `nproc`, the multi-process plan (`plan_view`), else None.
        precision: bfloat16 support and what `training.precision: auto` trains in here
            (`precision_view`).
    """

    dlm_version: str
    python_version: str
    system: str
    machine: str
    hardware_tier: str
    accelerator: str | None
    cuda_version: str | None
    rocm_version: str | None
    cpu_capability: str
    cpu_isa: str
    torch_threads: int
    determinism_class: str
    promise: str
    determinism_flags: dict[str, object]
    versions: dict[str, str]
    source: str = "probe"
    plan: dict[str, object] | None = None
    precision: dict[str, object] | None = None


def doctor(
    *,
    environment: Environment | None = None,
    ask_torch: bool = False,
    flags: DeterminismFlags | None = None,
    nproc: int | None = None,
    batch_size: int | None = None,
    gradient_accumulation_steps: int | None = None,
) -> DoctorView:
    """Describe this machine as `dlm train` will see it (no side effects).

    Args:
        environment: an `Environment` to describe; None reads this machine.
        ask_torch: read the machine through torch (`capture_environment`, imports torch,
            1.5 to 2 s) instead of the torch-free probe (`probe_environment`).
        flags: the switches to judge; None takes `planned_flags()`.
        nproc: also show the plan of `dlm train --nproc N` here (`plan_view`).
        batch_size, gradient_accumulation_steps: the document's values for the plan
            (None: the frontmatter defaults).
    """
    if environment is not None:
        env, source = environment, "given"
    elif ask_torch:
        env, source = capture_environment(), "torch"
    else:
        env, source = probe_environment(), "probe"
    switches = flags or planned_flags()
    state = isa_state()
    cpu_isa = describe_isa(state, env.cpu_capability)
    if source == "probe" and state.torch_preloaded:
        # torch fixed its ISA at its first op, which the probe cannot see; torch itself can
        cpu_isa += " (torch was imported before dlm: doctor(ask_torch=True) shows the ISA it uses)"
    cls = determinism_class(env.hardware_tier, switches)
    return DoctorView(
        dlm_version=__version__,
        python_version=platform.python_version() or sys.version.split()[0],
        system=env.system,
        machine=env.machine,
        hardware_tier=env.hardware_tier,
        accelerator=env.accelerator,
        cuda_version=env.cuda_version,
        rocm_version=env.rocm_version,
        cpu_capability=env.cpu_capability,
        cpu_isa=cpu_isa,
        torch_threads=env.torch_threads,
        determinism_class=cls,
        promise=PROMISES[cls],
        determinism_flags=switches.model_dump(mode="json"),
        versions=dict(env.versions),
        source=source,
        plan=plan_view(nproc, env, batch_size, gradient_accumulation_steps) if nproc else None,
        precision=precision_view(env.hardware_tier),
    )


def precision_view(hardware_tier: str, cpu_flags: frozenset[str] | None = None) -> dict[str, object]:
    """bfloat16 support on this machine (`dlm.train.precision`): `cpu_bf16` lists the
    CPU's AVX512-BF16 / AMX flags, `cuda_bf16` whether the GPU supports bfloat16 (None
    without a CUDA GPU; asking imports torch), `auto` the dtype `precision: auto` picks."""
    from dlm.cpu_isa import read_cpu_flags
    from dlm.train.precision import auto_dtype, cpu_bf16_flags

    flags = read_cpu_flags() if cpu_flags is None else cpu_flags
    cpu_bf16 = cpu_bf16_flags(flags, {})  # what the CPU has; `auto` below follows DLM_CPU_BF16
    cuda_bf16 = None
    if hardware_tier == "cuda":
        import torch

        cuda_bf16 = bool(torch.cuda.is_bf16_supported())
    return {
        "cpu_bf16": list(cpu_bf16),
        "cuda_bf16": cuda_bf16,
        "auto": auto_dtype(hardware_tier, bool(cuda_bf16), cpu_bf16_flags(flags)),
    }


def plan_view(
    nproc: int, env: Environment, batch_size: int | None = None, gradient_accumulation_steps: int | None = None
) -> dict[str, object]:
    """What `dlm train --nproc N` would run here: ranks, backend, device, threads per
    rank, rows per optimizer step, and the determinism notes of that shape.

    Raises:
        TrainingError: `nproc` below 1.
    """
    import os

    from dlm.doc.schema import TrainingConfig
    from dlm.train.distributed import make_plan
    from dlm.train.launch import rank_threads

    defaults = TrainingConfig()
    device = "cuda" if env.hardware_tier == "cuda" else "cpu"
    plan = make_plan(
        nproc,
        batch_size or defaults.batch_size,
        gradient_accumulation_steps or defaults.gradient_accumulation_steps,
        device,
    )
    return {
        "world_size": plan.world_size,
        "backend": plan.backend,
        "device": device,
        "threads_per_rank": int(rank_threads(nproc, os.environ, os.cpu_count())),
        "per_device_batch_size": plan.per_device_batch_size,
        "gradient_accumulation_steps": plan.gradient_accumulation_steps,
        "rows_per_step": plan.rows_per_step,
        "notes": plan.notes(),
    }


def describe_isa(state: IsaState, capability: str) -> str:
    """One line for the ISA pin: `mode: reason`, and the warning when it did not hold."""
    line = f"{state.mode}: {state.decision.reason}"
    warning = pin_warning(state, capability)
    return f"{line} ({warning})" if warning else line

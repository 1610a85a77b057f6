"""The CPU kernel ISA pin: one instruction set for torch's CPU kernels on x86-64 Linux machines.

torch compiles its vectorized CPU kernels several times (`DEFAULT`, `AVX2`, `AVX512`) and
picks one at the first dispatch from the CPU's flags. Kernels for different ISAs sum in
different orders, so the same training on an AVX2 and an AVX512 machine writes different
adapter bytes. torch reads `ATEN_CPU_CAPABILITY` (`default`, `avx2`, `avx512`) to override
its choice; it reads it once, when the capability is first needed, so it must be set before
torch runs anything. `dlm/__init__.py` calls `pin_cpu_isa()` first thing, so every
`import dlm...` (the CLI, `python -m dlm`, library users) pins before torch is imported.

Decision (`decide`, a pure function of the environment and the CPU):

    ATEN_CPU_CAPABILITY already set     the user's choice wins; dlm sets nothing   "user"
      (to a value torch reads; any other value torch ignores, so it is "invalid")
    DLM_CPU_ISA=native                  opt out for speed; torch picks by itself    "native"
    x86-64 Linux with AVX2 (or better)  ATEN_CPU_CAPABILITY=avx2,                   "pinned"
                                        MKL_ENABLE_INSTRUCTIONS=AVX2 (unless set)
    anything else (arm64, no AVX2, ...) nothing to pin; torch picks                 "unpinned"

Any other `DLM_CPU_ISA` value is a mistake, as is an `ATEN_CPU_CAPABILITY` torch ignores:
nothing is set and `IsaState.error` says so; `check_cpu_isa()` (called before training)
raises it as a `CpuIsaError`.

The pin also sets `MKL_ENABLE_INSTRUCTIONS=AVX2` (unless already set): torch's CPU wheel
does every training matmul through MKL's SGEMM, which dispatches by ISA on Intel CPUs the
same way torch does. It is MKL's plain ISA cap, unlike `MKL_CBWR`, which also switches MKL
into its conditional-reproducibility mode and so could differ from an AVX2 machine's
default path. oneDNN (`ONEDNN_MAX_CPU_ISA`) is left alone: no oneDNN primitive runs during
a `dlm train` (measured with `ONEDNN_VERBOSE=1`). docs/determinism.md has the measurements.

If torch was imported before dlm, the capability may already be fixed: `IsaState`
records `torch_preloaded`, `check_cpu_isa()` compares what torch really dispatches to
(`torch.backends.cpu.get_cpu_capability()`, which the lock records as `cpu_capability`)
with the pin and returns a warning line when they differ.

This module is on the ground floor: it imports nothing from dlm but `dlm.errors`, and
never imports torch (it must run before torch does). Only Linux is pinned because the CPU
flags come from `/proc/cpuinfo`.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Literal

from dlm.errors import CpuIsaError

ATEN_VAR = "ATEN_CPU_CAPABILITY"
OPT_VAR = "DLM_CPU_ISA"
PINNED_ISA = "avx2"
MKL_VAR = "MKL_ENABLE_INSTRUCTIONS"
MKL_PINNED_ISA = "AVX2"
NATIVE = "native"
CPUINFO = "/proc/cpuinfo"
X86_64 = frozenset({"x86_64", "amd64"})
# AVX2 kernels in torch also use FMA; a CPU with AVX2 but not FMA (none shipped) keeps DEFAULT
AVX2_FLAGS = frozenset({"avx2", "fma"})
# the values torch's dispatcher reads (ATen DispatchStub, compared exactly); any other
# value is ignored with a warning and torch picks by itself, so it is not a pin at all
ATEN_VALUES = frozenset({"default", "avx2", "avx512", "vsx", "zvector", "sve256"})
# torch dispatches to AVX512 only with all of these (its DispatchStub checks vl, bw, dq and fma)
AVX512_FLAGS = frozenset({"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"})

IsaMode = Literal["pinned", "native", "user", "unpinned", "invalid"]


@dataclass(frozen=True)
class IsaDecision:
    """What to do about the CPU ISA, before torch starts.

    Attributes:
        mode: `pinned` (dlm sets the pin), `native` (opted out), `user` (ATEN_CPU_CAPABILITY
            was already set), `unpinned` (not an x86-64 Linux machine with AVX2) or `invalid`
            (a bad `DLM_CPU_ISA`).
        set_env: variables to set, `{name: value}` (empty unless `pinned`).
        reason: one line saying why.
    """

    mode: IsaMode
    set_env: dict[str, str] = field(default_factory=dict)
    reason: str = ""


@dataclass(frozen=True)
class IsaState:
    """What `pin_cpu_isa()` did in this process.

    Attributes:
        decision: the `IsaDecision` applied.
        torch_preloaded: torch was already imported when the pin ran, so it may not hold.
        error: a message for a bad `DLM_CPU_ISA`, else None.
    """

    decision: IsaDecision
    torch_preloaded: bool
    error: str | None = None

    @property
    def mode(self) -> IsaMode:
        return self.decision.mode


def cpu_flags(cpuinfo_text: str) -> frozenset[str]:
    """The CPU feature flags from `/proc/cpuinfo` text (first `flags` line; x86 only).

    Returns an empty set when the text has no `flags` line (arm64 says `Features`).
    """
    return frozenset(_cpuinfo_field(cpuinfo_text, "flags").split())


def cpu_vendor(cpuinfo_text: str) -> str | None:
    """The CPU's `vendor_id` from `/proc/cpuinfo` text (`GenuineIntel`, `AuthenticAMD`),
    None where it has none (arm64)."""
    return _cpuinfo_field(cpuinfo_text, "vendor_id").strip() or None


def _cpuinfo_field(cpuinfo_text: str, name: str) -> str:
    """The value of the first `name : value` line, "" when there is none."""
    for line in cpuinfo_text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return value
    return ""


def read_cpuinfo(path: str = CPUINFO) -> str:
    """This machine's `/proc/cpuinfo` text; "" where it cannot be read."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def read_cpu_flags(path: str = CPUINFO) -> frozenset[str]:
    """`cpu_flags` of this machine's `/proc/cpuinfo`; empty where it cannot be read."""
    return cpu_flags(read_cpuinfo(path))


def decide(env: Mapping[str, str], *, system: str, machine: str, flags: frozenset[str]) -> IsaDecision:
    """The pin decision for an environment and a CPU (module docstring table; pure).

    Args:
        env: the process environment (only `ATEN_CPU_CAPABILITY` and `DLM_CPU_ISA` are read).
        system: `platform.system()` (`Linux`, `Darwin`, ...).
        machine: `platform.machine()` (`x86_64`, `arm64`, ...).
        flags: the CPU's feature flags (`cpu_flags`).
    """
    choice = env.get(OPT_VAR, "").strip().lower()
    if env.get(ATEN_VAR):
        if env[ATEN_VAR] not in ATEN_VALUES:
            return IsaDecision(
                "invalid",
                reason=(
                    f"{ATEN_VAR}={env[ATEN_VAR]!r} is a value torch ignores (it reads exactly "
                    f"{', '.join(sorted(ATEN_VALUES))}, lower case, and otherwise picks by itself): "
                    f"fix or unset it"
                ),
            )
        return IsaDecision("user", reason=f"{ATEN_VAR}={env[ATEN_VAR]} set by the user")
    if choice == NATIVE:
        return IsaDecision("native", reason=f"{OPT_VAR}=native: torch picks the fastest ISA")
    if choice not in ("", PINNED_ISA):
        return IsaDecision(
            "invalid", reason=f"{OPT_VAR}={env[OPT_VAR]!r} is not understood: unset it (pin AVX2) or set it to 'native'"
        )
    if system != "Linux" or machine.lower() not in X86_64:
        return IsaDecision("unpinned", reason=f"no pin on {system} {machine}: only x86-64 Linux is pinned")
    if not AVX2_FLAGS <= flags:
        return IsaDecision("unpinned", reason="this CPU lacks AVX2: torch uses its DEFAULT kernels")
    pins = {ATEN_VAR: PINNED_ISA}
    if not env.get(MKL_VAR):
        pins[MKL_VAR] = MKL_PINNED_ISA
    return IsaDecision("pinned", pins, reason=f"{ATEN_VAR}={PINNED_ISA} set by dlm")


def expected_capability(decision: IsaDecision) -> str | None:
    """The `torch.backends.cpu.get_cpu_capability()` the decision should produce, when known."""
    return PINNED_ISA.upper() if decision.mode == "pinned" else None


_STATE: IsaState | None = None


def pin_cpu_isa(environ: MutableMapping[str, str] | None = None) -> IsaState:
    """Decide and apply the pin to `environ` (default `os.environ`) once per process.

    Never raises (it runs while `dlm` is imported): a bad `DLM_CPU_ISA` is kept in
    `IsaState.error` for `check_cpu_isa()`. A later call returns the first state.
    """
    global _STATE
    if _STATE is not None and environ is None:
        return _STATE
    target = os.environ if environ is None else environ
    flags = read_cpu_flags() if platform.system() == "Linux" else frozenset()
    decision = decide(target, system=platform.system(), machine=platform.machine(), flags=flags)
    target.update(decision.set_env)
    state = IsaState(
        decision=decision,
        torch_preloaded="torch" in sys.modules,
        error=decision.reason if decision.mode == "invalid" else None,
    )
    if environ is None:
        _STATE = state
    return state


def isa_state() -> IsaState:
    """The state `pin_cpu_isa()` left in this process (pins now if it never ran)."""
    return _STATE if _STATE is not None else pin_cpu_isa()


def pin_warning(state: IsaState, capability: str) -> str | None:
    """A warning line when the pin was meant but torch dispatches to another ISA (pure).

    Args:
        state: this process's `IsaState`.
        capability: `torch.backends.cpu.get_cpu_capability()` (`AVX2`, `AVX512`, ...).
    """
    want = expected_capability(state.decision)
    if want is None or capability == want:
        return None
    why = "torch was imported before dlm" if state.torch_preloaded else "torch ignored the pin"
    return (
        f"CPU ISA pin did not take effect ({why}): torch dispatches to {capability}, not {want}, "
        f"so adapters will not match AVX2 machines byte for byte; import dlm before torch, "
        f"or export {ATEN_VAR}={PINNED_ISA} before starting Python"
    )


def check_cpu_isa(capability: str, state: IsaState | None = None) -> str | None:
    """Before training: raise on a bad `DLM_CPU_ISA`, else return `pin_warning` (or None).

    Raises:
        CpuIsaError: `DLM_CPU_ISA` is set to something other than `native` or `avx2`.
    """
    state = state or isa_state()
    if state.error:
        raise CpuIsaError(state.error)
    return pin_warning(state, capability)

"""The CPU ISA pin: its decisions as pure functions, and what torch really does after `import dlm`."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

from dlm.cpu_isa import (
    ATEN_VAR,
    MKL_VAR,
    OPT_VAR,
    IsaDecision,
    IsaState,
    check_cpu_isa,
    cpu_flags,
    cpu_vendor,
    decide,
    pin_cpu_isa,
    pin_warning,
    read_cpu_flags,
)
from dlm.errors import CpuIsaError, DlmError

AVX512_CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
flags\t\t: fpu vme sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 avx512f avx512dq avx512bw avx512vl
bugs\t\t: spectre_v1

processor\t: 1
flags\t\t: fpu sse
"""
ARM_CPUINFO = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32\n"
AVX2 = cpu_flags(AVX512_CPUINFO) - {"avx512f", "avx512dq", "avx512bw", "avx512vl"}
NO_AVX2 = frozenset({"sse", "sse2", "avx"})
LINUX_X86 = {"system": "Linux", "machine": "x86_64"}


def test_cpu_flags_reads_the_first_flags_line():
    flags = cpu_flags(AVX512_CPUINFO)
    assert {"avx2", "fma", "avx512f"} <= flags
    assert "spectre_v1" not in flags


def test_the_vendor_is_read_from_cpuinfo_and_none_without_one():
    assert cpu_vendor(AVX512_CPUINFO) == "GenuineIntel"
    assert cpu_vendor(ARM_CPUINFO) is None


def test_cpu_flags_of_arm_cpuinfo_is_empty():
    assert cpu_flags(ARM_CPUINFO) == frozenset()
    assert cpu_flags("") == frozenset()


def test_read_cpu_flags_of_a_missing_file_is_empty(tmp_path):
    assert read_cpu_flags(str(tmp_path / "nope")) == frozenset()


@pytest.mark.parametrize("flags", [cpu_flags(AVX512_CPUINFO), AVX2], ids=["avx512", "avx2"])
def test_x86_linux_with_avx2_or_better_is_pinned_to_avx2(flags):
    d = decide({}, flags=flags, **LINUX_X86)
    assert d.mode == "pinned" and d.set_env == {ATEN_VAR: "avx2", MKL_VAR: "AVX2"}


def test_a_user_set_mkl_cap_is_kept():
    d = decide({MKL_VAR: "AVX512"}, flags=AVX2, **LINUX_X86)
    assert d.mode == "pinned" and d.set_env == {ATEN_VAR: "avx2"}


def test_explicit_avx2_choice_pins_too():
    assert decide({OPT_VAR: "AVX2"}, flags=AVX2, **LINUX_X86).mode == "pinned"


def test_native_opts_out():
    d = decide({OPT_VAR: "native"}, flags=cpu_flags(AVX512_CPUINFO), **LINUX_X86)
    assert d.mode == "native" and d.set_env == {}


def test_a_user_set_aten_capability_wins_over_everything():
    for env in ({ATEN_VAR: "avx512"}, {ATEN_VAR: "default", OPT_VAR: "native"}, {ATEN_VAR: "avx2", OPT_VAR: "bogus"}):
        d = decide(env, flags=cpu_flags(AVX512_CPUINFO), **LINUX_X86)
        assert d.mode == "user" and d.set_env == {}, env


@pytest.mark.parametrize("value", ["AVX2", "Default", "avx-2", " avx2"])
def test_an_aten_capability_torch_would_ignore_is_refused_not_trusted(value):
    # torch compares the value exactly and silently picks by itself otherwise: not a pin
    d = decide({ATEN_VAR: value}, flags=cpu_flags(AVX512_CPUINFO), **LINUX_X86)
    assert d.mode == "invalid" and d.set_env == {}
    assert ATEN_VAR in d.reason and repr(value) in d.reason and "avx2" in d.reason


def test_a_cpu_without_avx2_is_left_alone():
    d = decide({}, flags=NO_AVX2, **LINUX_X86)
    assert d.mode == "unpinned" and d.set_env == {} and "AVX2" in d.reason


@pytest.mark.parametrize("system,machine", [("Linux", "aarch64"), ("Darwin", "arm64"), ("Darwin", "x86_64")])
def test_other_platforms_are_left_alone(system, machine):
    d = decide({}, system=system, machine=machine, flags=cpu_flags(AVX512_CPUINFO))
    assert d.mode == "unpinned" and d.set_env == {}


def test_an_unknown_choice_sets_nothing_and_says_how_out():
    d = decide({OPT_VAR: "avx512"}, flags=AVX2, **LINUX_X86)
    assert d.mode == "invalid" and d.set_env == {}
    assert OPT_VAR in d.reason and "native" in d.reason


def test_pin_updates_the_given_environment_only(monkeypatch):
    monkeypatch.delenv(ATEN_VAR, raising=False)
    env = {OPT_VAR: "native"}
    state = pin_cpu_isa(env)
    assert state.mode == "native" and env == {OPT_VAR: "native"}
    assert ATEN_VAR not in os.environ


def test_check_raises_a_dlm_error_on_a_bad_choice():
    state = IsaState(IsaDecision("invalid", reason=f"{OPT_VAR}='x' is not understood"), False, error="bad")
    with pytest.raises(CpuIsaError) as err:
        check_cpu_isa("AVX2", state)
    assert isinstance(err.value, DlmError) and err.value.exit_code == 1


def test_warning_only_when_the_pin_did_not_hold():
    pinned = IsaDecision("pinned", {ATEN_VAR: "avx2"})
    assert pin_warning(IsaState(pinned, False), "AVX2") is None
    late = pin_warning(IsaState(pinned, True), "AVX512")
    assert late and "imported before dlm" in late and "AVX512" in late and f"{ATEN_VAR}=avx2" in late
    assert pin_warning(IsaState(IsaDecision("native"), False), "AVX512") is None
    assert pin_warning(IsaState(IsaDecision("unpinned"), False), "DEFAULT") is None


def _torch_capability(code: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k not in (ATEN_VAR, OPT_VAR, MKL_VAR)}
    clean.update(env)
    out = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


REPORT = (
    "import json, os, torch\n"
    "from dlm.cpu_isa import isa_state, check_cpu_isa\n"
    "cap = torch.backends.cpu.get_cpu_capability()\n"
    "print(json.dumps({'cap': cap, 'mode': isa_state().mode, 'warning': check_cpu_isa(cap),\n"
    "                  'mkl': os.environ.get('MKL_ENABLE_INSTRUCTIONS')}))\n"
)
HAS_AVX2 = (
    platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64") and {"avx2", "fma"} <= read_cpu_flags()
)
HAS_AVX512 = HAS_AVX2 and "avx512f" in read_cpu_flags()
needs_avx2 = pytest.mark.skipif(not HAS_AVX2, reason="the pin applies to x86-64 Linux with AVX2 only")


@needs_avx2
def test_import_dlm_makes_torch_dispatch_to_avx2():
    got = _torch_capability("import dlm\n" + REPORT)
    assert got == {"cap": "AVX2", "mode": "pinned", "warning": None, "mkl": "AVX2"}


@pytest.mark.skipif(not HAS_AVX512, reason="native differs from the pin only on AVX512 machines")
def test_native_opt_out_lets_torch_use_avx512():
    got = _torch_capability("import dlm\n" + REPORT, **{OPT_VAR: "native"})
    assert got == {"cap": "AVX512", "mode": "native", "warning": None, "mkl": None}


@pytest.mark.skipif(not HAS_AVX512, reason="a late pin is visible only on AVX512 machines")
def test_torch_used_before_dlm_is_reported():
    got = _torch_capability("import torch\ntorch.ones(2).sum()\nimport dlm\n" + REPORT)
    assert got["cap"] == "AVX512" and got["mode"] == "pinned"
    assert "imported before dlm" in got["warning"]


def test_doctor_shows_the_pin_and_a_late_pin_warning():
    from dlm.actions.diagnostics import describe_isa

    pinned = IsaDecision("pinned", {ATEN_VAR: "avx2"}, reason="ATEN_CPU_CAPABILITY=avx2 set by dlm")
    assert describe_isa(IsaState(pinned, False), "AVX2") == "pinned: ATEN_CPU_CAPABILITY=avx2 set by dlm"
    late = describe_isa(IsaState(pinned, True), "AVX512")
    assert late.startswith("pinned: ") and "did not take effect" in late

"""The facts `capture_environment()` asks torch for, read without importing torch.

`dlm doctor` (its one caller) uses this probe so that it does not import torch, which
costs most of a command's start-up time (docs/benchmarks.md, "`dlm doctor` without
importing torch"). `dlm doctor --torch` and the lock (`dlm train`) ask torch itself. Each
fact follows the rule torch applies, read from files and the environment:

    versions        `importlib.metadata`, as `capture_environment` (`pinned_versions`).
    cuda_version,   `cuda = ...` and `hip = ...` in the installed `torch/version.py`, found
    rocm_version    with `importlib.util.find_spec("torch")` (the package is not executed)
                    and read with `ast` (literal values only, nothing is run). No torch
                    installed: None, and the tier is `cpu`.
    hardware_tier   `rocm`: a HIP build, `/dev/kfd` present and `HIP_VISIBLE_DEVICES`,
                    `ROCR_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES` not hiding every device.
                    `cuda`: a CUDA build and an NVIDIA device (`/proc/driver/nvidia/gpus/*`,
                    else `/dev/nvidia<N>` nodes) that `CUDA_VISIBLE_DEVICES` keeps visible
                    (its first entry empty, negative, out of range or an unknown UUID hides
                    them all, as in CUDA). `mps`: any torch on Darwin arm64. Else `cpu`.
    accelerator     NVIDIA: the `Model:` line of `/proc/driver/nvidia/gpus/*/information`
                    for the first visible device, in PCI bus order; `mps`: "Apple MPS".
    cpu_capability  torch's DispatchStub: `ATEN_CPU_CAPABILITY` equal to `default`, `avx2`
                    or `avx512` (exactly, lower case: torch warns and ignores `AVX2`) wins,
                    even above what the CPU has; else AVX512 when the CPU has `AVX512_FLAGS`,
                    AVX2 with `AVX2_FLAGS` (`/proc/cpuinfo`, read through `dlm.cpu_isa`), else
                    DEFAULT. Not x86-64: DEFAULT (see the limits).
    torch_threads   torch's default intra-op threads. A build with MKL and OpenMP (the x86
                    Linux wheels; `AT_MKL_ENABLED()` and `AT_PARALLEL_OPENMP` in the
                    installed `torch/include/ATen/Config.h`) sizes its pool to MKL's
                    `mkl_get_max_threads()`: `MKL_NUM_THREADS` (digits; 0 or empty: unset;
                    anything else: 1), else OpenMP's `OMP_NUM_THREADS` (first entry of the
                    list, positive), else the CPUs this process may run on (affinity); with
                    `MKL_DYNAMIC` not `false` (MKL's default) capped at the physical cores,
                    so `OMP_NUM_THREADS=7` on a 2-core machine gives 2. Other builds use
                    torch's own rule: `MKL_NUM_THREADS`, else `OMP_NUM_THREADS` (positive
                    integers), else the physical cores (Apple Silicon: its performance
                    cores, `hw.perflevel0.physicalcpu`). Physical cores are the distinct
                    (`physical id`, `core id`) pairs of `/proc/cpuinfo`, else `os.cpu_count()`.

The rules were checked against torch's own answers for every environment variable case
above (docs/benchmarks.md names the torch build and machine); `tests/lock/test_probe.py`
keeps the probe equal to `capture_environment()` on the machine that runs the tests.

Known limits (where `dlm doctor --torch` can say otherwise):
- The probe sees devices, not drivers: a broken or mismatched NVIDIA driver makes torch
  say no CUDA (`cpu`) while the probe says `cuda`.
- CUDA numbers devices fastest first unless `CUDA_DEVICE_ORDER=PCI_BUS_ID`; on a machine
  with different GPU models the accelerator named may not be torch's device 0. MIG device
  ids give no name. ROCm devices get no accelerator name.
- CPU flags come from `/proc/cpuinfo`: off Linux an x86-64 CPU reads as DEFAULT. On arm64
  torch may report an SVE level (`SVE256`) where the probe says DEFAULT.
- Off Linux no NVIDIA device is seen, so Windows reads `cpu`.
- The MKL thread rule is observed behaviour of a closed library; on machines with
  hyperthreads and a narrow affinity mask MKL may count differently.
- The probe reads the environment now; torch reads it once, at its first use, so in a
  process where torch already ran, torch's answer can differ.
"""

from __future__ import annotations

import ast
import importlib.machinery
import importlib.util
import os
import platform
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from dlm.cpu_isa import ATEN_VAR, AVX2_FLAGS, AVX512_FLAGS, CPUINFO, X86_64, cpu_flags
from dlm.lock.environment import Environment, pinned_versions
from dlm.lock.schema import HardwareTier

# the values torch's DispatchStub accepts in ATEN_CPU_CAPABILITY on x86-64 (compared exactly)
TORCH_CAPABILITIES = {"default": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512"}
NVIDIA_GPUS = "driver/nvidia/gpus"
VISIBLE_VARS_ROCM = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")


@dataclass(frozen=True)
class TorchBuild:
    """What the installed torch was built with.

    Attributes:
        cuda: `torch.version.cuda` (`"12.1"`), else None.
        hip: `torch.version.hip` (`"6.2.41133-..."`), else None.
        mkl_openmp: MKL and the OpenMP backend, so MKL sizes the thread pool.
    """

    cuda: str | None
    hip: str | None
    mkl_openmp: bool


@dataclass(frozen=True)
class ProbeInputs:
    """Everything the probe reads, so that tests can hand it a fake machine.

    Attributes:
        environ: the process environment.
        system, machine: `platform.system()`, `platform.machine()`.
        cpuinfo: the text of `/proc/cpuinfo` ("" where there is none).
        proc, dev: the roots standing for `/proc` and `/dev`.
        affinity: logical CPUs this process may run on.
        logical: logical CPUs of the machine (`os.cpu_count()`).
        perf_cores: performance cores on Apple Silicon, else None.
        search_path: folders to find torch and the distributions in; None: the
            interpreter's import system and `sys.path`.
    """

    environ: Mapping[str, str]
    system: str
    machine: str
    cpuinfo: str = ""
    proc: Path = Path("/proc")
    dev: Path = Path("/dev")
    affinity: int = 1
    logical: int = 1
    perf_cores: int | None = None
    search_path: list[str] | None = None


def probe_environment(inputs: ProbeInputs | None = None) -> Environment:
    """The `Environment` `capture_environment()` would return, without importing torch.

    Args:
        inputs: the machine to read; None reads this one (`current_inputs()`).
    """
    inputs = inputs or current_inputs()
    torch_dir = find_torch_dir(inputs.search_path)
    build = read_torch_build(torch_dir) if torch_dir is not None else None
    tier, accelerator = hardware(build, inputs)
    return Environment(
        hardware_tier=tier,
        cuda_version=build.cuda if build else None,
        rocm_version=build.hip if build else None,
        cpu_capability=cpu_capability(inputs.environ, inputs.machine, cpu_flags(inputs.cpuinfo)),
        torch_threads=torch_threads(build, inputs),
        system=inputs.system,
        machine=inputs.machine,
        accelerator=accelerator,
        versions=pinned_versions(inputs.search_path),
    )


def current_inputs() -> ProbeInputs:
    """`ProbeInputs` of this process and machine (reads `/proc/cpuinfo`; on Apple Silicon
    runs `sysctl` once)."""
    system, machine = platform.system(), platform.machine()
    try:
        cpuinfo = Path(CPUINFO).read_text(encoding="utf-8", errors="replace")
    except OSError:
        cpuinfo = ""
    logical = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else logical
    perf = _sysctl_int("hw.perflevel0.physicalcpu") if (system, machine) == ("Darwin", "arm64") else None
    return ProbeInputs(
        environ=os.environ,
        system=system,
        machine=machine,
        cpuinfo=cpuinfo,
        affinity=affinity,
        logical=logical,
        perf_cores=perf,
    )


def find_torch_dir(search_path: list[str] | None = None) -> Path | None:
    """The folder of the installed `torch` package, or None; never imports it.

    Args:
        search_path: folders to search; None: the import system (`importlib.util.find_spec`).
    """
    if search_path is None:
        spec = importlib.util.find_spec("torch")
    else:
        spec = importlib.machinery.PathFinder.find_spec("torch", search_path)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def read_literals(path: Path) -> dict[str, object]:
    """`{name: value}` of the module-level assignments in a Python file whose value is a
    literal (`cuda: Optional[str] = '12.1'`, `debug = False`); nothing is executed.

    Returns an empty dict when the file is missing or is not Python.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return {}
    found: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            literal = ast.literal_eval(value)
        except ValueError:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                found[target.id] = literal
    return found


def read_torch_build(torch_dir: Path) -> TorchBuild:
    """The build facts of the torch package in `torch_dir` (`version.py`, and
    `include/ATen/Config.h`, which a build without headers lacks: then not MKL)."""
    values = read_literals(torch_dir / "version.py")
    try:
        config = (torch_dir / "include" / "ATen" / "Config.h").read_text(encoding="utf-8")
    except OSError:
        config = ""
    defines = dict(re.findall(r"#define\s+(AT_\w+)(?:\(\))?\s+(\d+)", config))
    mkl_openmp = (
        defines.get("AT_MKL_ENABLED"),
        defines.get("AT_MKL_SEQUENTIAL"),
        defines.get("AT_PARALLEL_OPENMP"),
    ) == ("1", "0", "1")
    return TorchBuild(cuda=_text(values.get("cuda")), hip=_text(values.get("hip")), mkl_openmp=mkl_openmp)


def hardware(build: TorchBuild | None, inputs: ProbeInputs) -> tuple[HardwareTier, str | None]:
    """`(hardware_tier, accelerator)` by the module docstring's rule."""
    if build is None:
        return "cpu", None
    if build.hip:
        hidden = any(_hides_all(inputs.environ.get(name)) for name in VISIBLE_VARS_ROCM)
        return ("rocm", None) if (inputs.dev / "kfd").exists() and not hidden else ("cpu", None)
    if build.cuda:
        gpus = nvidia_gpus(inputs.proc, inputs.dev)
        index = cuda_device_zero(inputs.environ.get("CUDA_VISIBLE_DEVICES"), gpus)
        if index is not None:
            return "cuda", gpus[index].get("Model") if index >= 0 else None
    if inputs.system == "Darwin" and inputs.machine == "arm64":
        return "mps", "Apple MPS"
    return "cpu", None


def nvidia_gpus(proc: Path, dev: Path) -> list[dict[str, str]]:
    """One `{key: value}` per NVIDIA device, from `<proc>/driver/nvidia/gpus/*/information`
    in PCI bus order; without that folder, an empty dict per `<dev>/nvidia<N>` node."""
    folders = sorted((proc / NVIDIA_GPUS).glob("*")) if (proc / NVIDIA_GPUS).is_dir() else []
    if folders:
        return [_key_values(folder / "information") for folder in folders]
    try:
        nodes = [p for p in dev.iterdir() if re.fullmatch(r"nvidia\d+", p.name)]
    except OSError:
        nodes = []
    return [{} for _ in nodes]


def cuda_device_zero(visible: str | None, gpus: list[dict[str, str]]) -> int | None:
    """The index in `gpus` CUDA calls device 0 under `CUDA_VISIBLE_DEVICES=visible`;
    -1 when one is visible but which is unknown (a MIG id); None when none is."""
    if not gpus:
        return None
    if visible is None:
        return 0
    first = visible.split(",")[0].strip()
    if re.fullmatch(r"-?\d+", first):
        return int(first) if 0 <= int(first) < len(gpus) else None
    if first.startswith("MIG-"):
        return -1
    if first.startswith("GPU-"):
        uuids = [gpu.get("GPU UUID", "") for gpu in gpus]
        if not any(uuids):
            return -1
        return next((i for i, uuid in enumerate(uuids) if uuid.startswith(first)), None)
    return None


def cpu_capability(environ: Mapping[str, str], machine: str, flags: frozenset[str]) -> str:
    """`torch.backends.cpu.get_cpu_capability()` by the module docstring's rule.

    Args:
        environ: the environment (`ATEN_CPU_CAPABILITY`).
        machine: `platform.machine()`.
        flags: the CPU's flags (`dlm.cpu_isa.cpu_flags`).
    """
    if machine.lower() not in X86_64:
        return "DEFAULT"
    chosen = TORCH_CAPABILITIES.get(environ.get(ATEN_VAR, ""))
    if chosen is not None:
        return chosen
    if AVX512_FLAGS <= flags:
        return "AVX512"
    return "AVX2" if AVX2_FLAGS <= flags else "DEFAULT"


def physical_cores(cpuinfo: str) -> int | None:
    """Distinct (`physical id`, `core id`) pairs in `/proc/cpuinfo` text; None without them."""
    cores: set[tuple[str, str]] = set()
    package = core = None
    for line in [*cpuinfo.splitlines(), ""]:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            package = value.strip()
        elif key == "core id":
            core = value.strip()
        elif not line.strip():  # a blank line ends one processor's block
            if package is not None and core is not None:
                cores.add((package, core))
            package = core = None
    return len(cores) or None


def torch_threads(build: TorchBuild | None, inputs: ProbeInputs) -> int:
    """`torch.get_num_threads()` in a fresh process, by the module docstring's rule."""
    env = inputs.environ
    cores = inputs.perf_cores or physical_cores(inputs.cpuinfo) or inputs.logical
    if build is not None and build.mkl_openmp:
        wanted = _mkl_threads(env.get("MKL_NUM_THREADS")) or _omp_threads(env.get("OMP_NUM_THREADS"))
        wanted = wanted or inputs.affinity
        return wanted if env.get("MKL_DYNAMIC", "").lower() == "false" else min(wanted, cores)
    wanted = _stoi(env.get("MKL_NUM_THREADS")) or _stoi(env.get("OMP_NUM_THREADS"))
    return wanted or cores


def _mkl_threads(value: str | None) -> int | None:
    """MKL's reading of `MKL_NUM_THREADS` (observed): digits give that number, 0 or empty
    mean unset (None), anything else ("-1", "3x", " 3") gives 1."""
    if not value or (value.isdigit() and int(value) == 0):
        return None
    return int(value) if value.isdigit() else 1


def _omp_threads(value: str | None) -> int | None:
    """libgomp's reading of `OMP_NUM_THREADS`: the first entry of the list, a positive
    integer (a leading `+` and spaces allowed); None when unset or invalid."""
    if value is None:
        return None
    match = re.fullmatch(r"\s*\+?(\d+)\s*(?:,.*)?", value, flags=re.DOTALL)
    return (int(match.group(1)) or None) if match else None


def _stoi(value: str | None) -> int | None:
    """torch's reading of a thread variable (`std::stoi`, then positive); None otherwise."""
    match = re.match(r"\s*([+-]?\d+)", value or "")
    return int(match.group(1)) if match and int(match.group(1)) > 0 else None


def _hides_all(visible: str | None) -> bool:
    return visible is not None and re.fullmatch(r"\s*(-\d+)?\s*(,.*)?", visible, flags=re.DOTALL) is not None


def _key_values(path: Path) -> dict[str, str]:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    pairs = (line.partition(":") for line in text.splitlines())
    return {key.strip(): value.strip() for key, sep, value in pairs if sep}


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _sysctl_int(name: str) -> int | None:
    try:
        out = subprocess.run(["sysctl", "-n", name], capture_output=True, text=True, timeout=5, check=False)
        return int(out.stdout.strip())
    except (OSError, ValueError, subprocess.SubprocessError):
        return None

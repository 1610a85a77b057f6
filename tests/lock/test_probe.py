"""The torch-free probe: its rules on fake machines, and its answer against torch's here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlm.lock.environment import PINNED_PACKAGES
from dlm.lock.probe import (
    ProbeInputs,
    TorchBuild,
    cpu_capability,
    physical_cores,
    probe_environment,
    read_literals,
    read_torch_build,
    torch_threads,
)

AVX2 = frozenset({"sse4_2", "avx", "avx2", "fma"})
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"}
MKL = TorchBuild(cuda=None, hip=None, mkl_openmp=True)
PLAIN = TorchBuild(cuda=None, hip=None, mkl_openmp=False)
H100 = "NVIDIA H100 80GB HBM3"


def fake_torch(site: Path, version_py: str, *, version: str = "2.5.1+cu121", config_h: str = "") -> Path:
    """A torch install under `site` whose `__init__` raises if anything executes it."""
    pkg = site / "torch"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise RuntimeError('the probe must not import torch')\n")
    (pkg / "version.py").write_text(version_py)
    if config_h:
        (pkg / "include" / "ATen").mkdir(parents=True)
        (pkg / "include" / "ATen" / "Config.h").write_text(config_h)
    meta = site / f"torch-{version}.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    return site


def fake_nvidia(proc: Path, gpus: dict[str, tuple[str, str]]) -> Path:
    """`<proc>/driver/nvidia/gpus/<bus id>/information` for each `{bus id: (model, uuid)}`."""
    for bus, (model, uuid) in gpus.items():
        folder = proc / "driver" / "nvidia" / "gpus" / bus
        folder.mkdir(parents=True)
        (folder / "information").write_text(
            f"Model: \t\t {model}\nIRQ:   \t\t 35\nGPU UUID: \t {uuid}\nBus Location: \t {bus}\n"
        )
    return proc


def inputs(tmp_path: Path, site: Path | None = None, **changes: object) -> ProbeInputs:
    (tmp_path / "proc").mkdir(exist_ok=True)
    (tmp_path / "dev").mkdir(exist_ok=True)
    base: dict[str, object] = {
        "environ": {},
        "system": "Linux",
        "machine": "x86_64",
        "cpuinfo": "",
        "proc": tmp_path / "proc",
        "dev": tmp_path / "dev",
        "affinity": 4,
        "logical": 4,
        "search_path": [str(site or tmp_path / "empty")],
    }
    return ProbeInputs(**{**base, **changes})  # type: ignore[arg-type]


CUDA_PY = "from typing import Optional\n__version__ = '2.5.1+cu121'\ncuda: Optional[str] = '12.1'\nhip: Optional[str] = None\n"
ROCM_PY = "cuda = None\nhip = '6.2.41133-dd7f95766'\n"


def test_read_literals_takes_literals_and_runs_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "version.py"
    path.write_text(
        f"import os\ncuda: str = '12.1'\nhip = None\ndebug = False\nside = open({str(marker)!r}, 'w')\n"
        "a = b = 'x'\nfrom_env = os.environ.get('CUDA')\n"
    )
    assert read_literals(path) == {"cuda": "12.1", "hip": None, "debug": False, "a": "x", "b": "x"}
    assert not marker.exists()
    (tmp_path / "broken.py").write_text("cuda = (\n")
    assert read_literals(tmp_path / "broken.py") == {} == read_literals(tmp_path / "missing.py")


def test_cuda_build_with_an_nvidia_device_is_cuda(tmp_path: Path) -> None:
    site = fake_torch(tmp_path / "site", CUDA_PY)
    proc = fake_nvidia(
        tmp_path / "proc", {"0000:01:00.0": (H100, "GPU-aaaa-1111"), "0000:02:00.0": ("NVIDIA A10", "GPU-bbbb-2222")}
    )
    env = probe_environment(inputs(tmp_path, site, proc=proc))
    assert (env.hardware_tier, env.accelerator, env.cuda_version, env.rocm_version) == ("cuda", H100, "12.1", None)
    assert env.versions["torch"] == "2.5.1+cu121"
    second = probe_environment(inputs(tmp_path, site, proc=proc, environ={"CUDA_VISIBLE_DEVICES": "1,0"}))
    assert second.accelerator == "NVIDIA A10"
    by_uuid = probe_environment(inputs(tmp_path, site, proc=proc, environ={"CUDA_VISIBLE_DEVICES": "GPU-bbbb"}))
    assert (by_uuid.hardware_tier, by_uuid.accelerator) == ("cuda", "NVIDIA A10")


@pytest.mark.parametrize("visible", ["", "-1", "-1,0", "2", "GPU-ffff", "nonsense"])
def test_cuda_visible_devices_can_hide_every_device(tmp_path: Path, visible: str) -> None:
    site = fake_torch(tmp_path / "site", CUDA_PY)
    proc = fake_nvidia(tmp_path / "proc", {"0000:01:00.0": (H100, "GPU-aaaa"), "0000:02:00.0": (H100, "GPU-bbbb")})
    env = probe_environment(inputs(tmp_path, site, proc=proc, environ={"CUDA_VISIBLE_DEVICES": visible}))
    assert (env.hardware_tier, env.accelerator, env.cuda_version) == ("cpu", None, "12.1")


def test_device_nodes_without_proc_entries_still_count(tmp_path: Path) -> None:
    site = fake_torch(tmp_path / "site", CUDA_PY)
    (tmp_path / "dev").mkdir()
    for name in ("nvidiactl", "nvidia-uvm"):
        (tmp_path / "dev" / name).write_text("")
    assert probe_environment(inputs(tmp_path, site)).hardware_tier == "cpu"
    (tmp_path / "dev" / "nvidia0").write_text("")
    env = probe_environment(inputs(tmp_path, site))
    assert (env.hardware_tier, env.accelerator) == ("cuda", None)


def test_cpu_build_on_a_gpu_machine_is_cpu(tmp_path: Path) -> None:
    site = fake_torch(tmp_path / "site", "cuda = None\nhip = None\n", version="2.5.1+cpu")
    proc = fake_nvidia(tmp_path / "proc", {"0000:01:00.0": (H100, "GPU-aaaa")})
    env = probe_environment(inputs(tmp_path, site, proc=proc))
    assert (env.hardware_tier, env.cuda_version, env.versions["torch"]) == ("cpu", None, "2.5.1+cpu")


def test_rocm_needs_kfd_and_a_visible_device(tmp_path: Path) -> None:
    site = fake_torch(tmp_path / "site", ROCM_PY)
    assert probe_environment(inputs(tmp_path, site)).hardware_tier == "cpu"
    (tmp_path / "dev" / "kfd").write_text("")
    env = probe_environment(inputs(tmp_path, site))
    assert (env.hardware_tier, env.rocm_version, env.cuda_version) == ("rocm", "6.2.41133-dd7f95766", None)
    for name in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        assert probe_environment(inputs(tmp_path, site, environ={name: ""})).hardware_tier == "cpu"


def test_apple_silicon_with_torch_is_mps(tmp_path: Path) -> None:
    site = fake_torch(tmp_path / "site", "cuda = None\nhip = None\n", version="2.5.1")
    env = probe_environment(inputs(tmp_path, site, system="Darwin", machine="arm64", perf_cores=8))
    assert (env.hardware_tier, env.accelerator, env.cpu_capability, env.torch_threads) == (
        "mps",
        "Apple MPS",
        "DEFAULT",
        8,
    )


def test_no_torch_installed(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    env = probe_environment(inputs(tmp_path, system="Darwin", machine="arm64"))
    assert (env.hardware_tier, env.cuda_version, env.rocm_version, env.accelerator) == ("cpu", None, None, None)
    assert env.versions == {name: "absent" for name in PINNED_PACKAGES}


def test_mkl_and_openmp_are_read_from_the_installed_headers(tmp_path: Path) -> None:
    config = "#define AT_MKL_ENABLED() 1\n#define AT_MKL_SEQUENTIAL() 0\n#define AT_PARALLEL_OPENMP 1\n"
    assert read_torch_build(fake_torch(tmp_path / "a", CUDA_PY, config_h=config) / "torch").mkl_openmp
    sequential = config.replace("SEQUENTIAL() 0", "SEQUENTIAL() 1")
    assert not read_torch_build(fake_torch(tmp_path / "b", CUDA_PY, config_h=sequential) / "torch").mkl_openmp
    assert not read_torch_build(fake_torch(tmp_path / "c", CUDA_PY) / "torch").mkl_openmp


@pytest.mark.parametrize(
    ("env", "machine", "flags", "expected"),
    [
        ({}, "x86_64", AVX512, "AVX512"),
        ({"ATEN_CPU_CAPABILITY": "avx2"}, "x86_64", AVX512, "AVX2"),
        ({"ATEN_CPU_CAPABILITY": "default"}, "x86_64", AVX512, "DEFAULT"),
        ({"ATEN_CPU_CAPABILITY": "AVX2"}, "x86_64", AVX512, "AVX512"),  # torch compares exactly
        ({"ATEN_CPU_CAPABILITY": "avx512"}, "x86_64", AVX2, "AVX512"),  # not capped by the CPU
        ({}, "x86_64", AVX2, "AVX2"),
        ({}, "x86_64", AVX2 - {"fma"}, "DEFAULT"),
        ({}, "x86_64", AVX512 - {"avx512dq"}, "AVX2"),
        ({}, "x86_64", frozenset(), "DEFAULT"),
        ({"ATEN_CPU_CAPABILITY": "avx2"}, "aarch64", frozenset(), "DEFAULT"),
    ],
)
def test_cpu_capability_follows_torch(env: dict[str, str], machine: str, flags: frozenset[str], expected: str) -> None:
    assert cpu_capability(env, machine, flags) == expected


def cpuinfo(cpus: list[tuple[int, int]]) -> str:
    """`/proc/cpuinfo` text with one block per (physical id, core id)."""
    return "\n".join(
        f"processor\t: {i}\nphysical id\t: {p}\ncore id\t\t: {c}\nflags\t\t: fpu avx2 fma\n"
        for i, (p, c) in enumerate(cpus)
    )


def test_physical_cores_counts_distinct_sockets_and_cores() -> None:
    assert physical_cores(cpuinfo([(0, 0), (0, 1), (0, 0), (0, 1)])) == 2  # two hyperthreaded cores
    assert physical_cores(cpuinfo([(0, 0), (1, 0)])) == 2  # two sockets, core 0 each
    assert physical_cores("processor\t: 0\nFeatures\t: fp asimd\n\nprocessor\t: 1\nFeatures\t: fp asimd\n") is None


@pytest.mark.parametrize(
    ("build", "env", "expected"),
    [
        (MKL, {}, 2),  # affinity 4 logical CPUs, capped at 2 physical cores
        (MKL, {"OMP_NUM_THREADS": "1"}, 1),
        (MKL, {"OMP_NUM_THREADS": "7"}, 2),
        (MKL, {"OMP_NUM_THREADS": "7", "MKL_DYNAMIC": "FALSE"}, 7),
        (MKL, {"OMP_NUM_THREADS": "3,1", "MKL_DYNAMIC": "false"}, 3),
        (MKL, {"OMP_NUM_THREADS": "0"}, 2),
        (MKL, {"OMP_NUM_THREADS": "1abc"}, 2),
        (MKL, {"MKL_NUM_THREADS": "1", "OMP_NUM_THREADS": "2"}, 1),
        (MKL, {"MKL_NUM_THREADS": "0", "OMP_NUM_THREADS": "1"}, 1),
        (MKL, {"MKL_NUM_THREADS": "-1", "MKL_DYNAMIC": "FALSE"}, 1),
        (PLAIN, {}, 2),
        (PLAIN, {"OMP_NUM_THREADS": "7"}, 7),
        (PLAIN, {"OMP_NUM_THREADS": "7", "MKL_NUM_THREADS": "3"}, 3),
        (PLAIN, {"OMP_NUM_THREADS": "-2"}, 2),
        (None, {"OMP_NUM_THREADS": "5"}, 5),
    ],
)
def test_torch_threads(tmp_path: Path, build: TorchBuild | None, env: dict[str, str], expected: int) -> None:
    machine = inputs(tmp_path, environ=env, cpuinfo=cpuinfo([(0, 0), (0, 1), (0, 0), (0, 1)]), affinity=4)
    assert torch_threads(build, machine) == expected


def test_mkl_threads_start_from_the_affinity_mask(tmp_path: Path) -> None:
    machine = inputs(tmp_path, cpuinfo=cpuinfo([(0, 0), (0, 1)]), affinity=1, logical=2)
    assert torch_threads(MKL, machine) == 1
    assert torch_threads(PLAIN, machine) == 2  # torch's own rule counts the machine's cores


_COMPARE = """
import json, warnings
import dlm
from dlm.lock.probe import probe_environment
probed = probe_environment()
import sys
assert "torch" not in sys.modules
from dlm.lock.environment import capture_environment
warnings.simplefilter("ignore")
print(json.dumps({"probe": probed.__dict__, "torch": capture_environment().__dict__}))
"""
CLEAN = (
    "ATEN_CPU_CAPABILITY",
    "DLM_CPU_ISA",
    "MKL_ENABLE_INSTRUCTIONS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "MKL_DYNAMIC",
)


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"DLM_CPU_ISA": "native"},
        {"OMP_NUM_THREADS": "1"},
        {"OMP_NUM_THREADS": "7"},
        {"OMP_NUM_THREADS": "3", "MKL_DYNAMIC": "FALSE"},
    ],
    ids=["pinned", "native", "omp1", "omp7", "omp3-no-dynamic"],
)
def test_probe_equals_torch_on_this_machine(env: dict[str, str]) -> None:
    """A fresh interpreter per case: torch reads these variables once per process."""
    child_env = {k: v for k, v in os.environ.items() if k not in CLEAN} | env
    proc = subprocess.run(
        [sys.executable, "-c", _COMPARE], env=child_env, capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["probe"] == got["torch"]

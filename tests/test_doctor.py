"""`dlm doctor` reads the machine without torch by default; `--torch` asks torch."""

from __future__ import annotations

import json
import subprocess
import sys

from dlm.actions.diagnostics import doctor
from dlm.lock import Environment

RUNNER = """
import sys
from dlm.cli.main import app
app(sys.argv[1:], standalone_mode=False)
print("imported torch" if "torch" in sys.modules else "no torch", file=sys.stderr)
"""


def run_doctor(*args: str) -> tuple[dict, str]:
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, "doctor", *args], capture_output=True, text=True, check=False, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), proc.stderr.strip().splitlines()[-1]


def test_doctor_probes_without_torch_and_agrees_with_torch() -> None:
    probed, probed_torch = run_doctor("--json", "--nproc", "2")
    asked, asked_torch = run_doctor("--torch", "--json")
    # on a CUDA machine the precision view asks torch whether the GPU has bfloat16
    # (`dlm.actions.diagnostics`): only there may the probe import it
    probe_imports = "imported torch" if probed["hardware_tier"] == "cuda" else "no torch"
    assert (probed_torch, asked_torch) == (probe_imports, "imported torch")
    assert (probed["source"], asked["source"]) == ("probe", "torch")
    assert probed["plan"]["world_size"] == 2
    same = (
        "hardware_tier",
        "accelerator",
        "cuda_version",
        "rocm_version",
        "cpu_capability",
        "torch_threads",
        "cpu_isa",
        "determinism_class",
        "versions",
    )
    assert {k: probed[k] for k in same} == {k: asked[k] for k in same}


def test_a_given_environment_is_reported_as_given() -> None:
    env = Environment(
        hardware_tier="cuda",
        cuda_version="12.4",
        rocm_version=None,
        cpu_capability="AVX2",
        torch_threads=4,
        system="Linux",
        machine="x86_64",
        accelerator="NVIDIA H100",
        versions={"torch": "2.5.1"},
    )
    view = doctor(environment=env)
    assert (view.source, view.hardware_tier, view.determinism_class) == ("given", "cuda", "strong")


def test_torch_imported_before_dlm_sends_the_reader_to_torch() -> None:
    code = "import torch, json\nfrom dlm.actions.diagnostics import doctor\nprint(json.dumps(doctor().cpu_isa))"
    proc = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "doctor(ask_torch=True)" in json.loads(proc.stdout)

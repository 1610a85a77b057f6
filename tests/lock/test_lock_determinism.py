"""Determinism switches, the class matrix, and `dlm doctor` agreeing with the lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer
from lock_factory import FIXED_ENV, make_inputs
from typer.testing import CliRunner

from dlm.actions.diagnostics import doctor as doctor_view
from dlm.lock import build_lock, determinism_class, planned_flags
from dlm.lock.determinism import make_flags

FULL = dict(
    use_deterministic_algorithms=True,
    deterministic_warn_only=False,
    cudnn_deterministic=True,
    cudnn_benchmark=False,
    cublas_workspace_config=":4096:8",
)


@pytest.mark.parametrize(
    ("change", "full"),
    [
        ({}, True),
        ({"cublas_workspace_config": ":16:8"}, True),
        ({"use_deterministic_algorithms": False}, False),
        ({"deterministic_warn_only": True}, False),
        ({"cudnn_deterministic": False}, False),
        ({"cudnn_benchmark": True}, False),
        ({"cublas_workspace_config": None}, False),
        ({"cublas_workspace_config": ":0:0"}, False),
    ],
)
def test_full_determinism_needs_every_switch(change: dict, full: bool) -> None:
    assert make_flags(**{**FULL, **change}).full_determinism is full


@pytest.mark.parametrize(
    ("tier", "full", "expected"),
    [
        ("cuda", True, "strong"),
        ("cuda", False, "best-effort"),
        ("rocm", True, "best-effort"),
        ("mps", True, "best-effort"),
        ("cpu", True, "advisory"),
        ("cpu", False, "advisory"),
        ("tpu", True, "advisory"),
    ],
)
def test_determinism_class(tier: str, full: bool, expected: str) -> None:
    flags = make_flags(**{**FULL, "deterministic_warn_only": not full})
    assert determinism_class(tier, flags) == expected


_CHILD = """
import json, torch
from dlm.lock import apply_determinism, build_lock, current_flags, planned_flags, LockInputs
from dlm.actions.diagnostics import doctor as doctor_view
before = current_flags()
plan = planned_flags()
flags = apply_determinism(1234)
a = torch.rand(4).tolist()
apply_determinism(1234)
b = torch.rand(4).tolist()
lock = build_lock(LockInputs(dlm_id="01M82E20JJ2XKSFH4S4XVQ8Q5N", dlm_sha256="s", base_model_name="m",
                  base_model_revision="r", precision="float32", seed=1234, tokenizer_sha256="t",
                  corpus_fingerprint="c"), flags)
print(json.dumps({"before": before.model_dump(), "plan": plan.model_dump(), "flags": flags.model_dump(),
                  "same_stream": a == b, "lock_class": lock.determinism_class,
                  "doctor_class": doctor_view().determinism_class,
                  "enabled": torch.are_deterministic_algorithms_enabled()}))
"""


def test_apply_determinism_sets_what_it_planned_and_doctor_agrees_with_the_lock() -> None:
    """Run in a fresh process: the switches are process-global."""
    env = {k: v for k, v in os.environ.items() if k != "CUBLAS_WORKSPACE_CONFIG"}
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True, timeout=300
    )
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["before"]["use_deterministic_algorithms"] is False  # it really changed something
    assert out["flags"] == out["plan"]
    assert out["flags"]["full_determinism"] is True and out["enabled"] is True
    assert out["same_stream"] is True
    assert out["lock_class"] == out["doctor_class"]


def test_doctor_view_uses_the_lock_class_rule() -> None:
    view = doctor_view(environment=FIXED_ENV)
    lock = build_lock(make_inputs(), planned_flags(), environment=FIXED_ENV)
    assert view.determinism_class == lock.determinism_class == "advisory"
    assert view.versions == lock.pinned_versions
    cuda = FIXED_ENV.__class__(**{**FIXED_ENV.__dict__, "hardware_tier": "cuda", "cuda_version": "12.4"})
    assert doctor_view(environment=cuda).determinism_class == "strong"
    relaxed = planned_flags(warn_only=True)
    assert doctor_view(environment=cuda, flags=relaxed).determinism_class == "best-effort"


def _doctor_app() -> typer.Typer:
    from dlm.cli.doctor_cmd import register

    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        pass

    register(app)
    return app


def test_doctor_cli_json_and_table() -> None:
    runner = CliRunner()
    result = runner.invoke(_doctor_app(), ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    view = doctor_view()
    assert data["determinism_class"] == view.determinism_class
    assert data["hardware_tier"] == view.hardware_tier
    assert set(data["versions"]) >= {
        "torch",
        "transformers",
        "peft",
        "accelerate",
        "tokenizers",
        "numpy",
    }
    table = runner.invoke(_doctor_app(), ["doctor"])
    assert table.exit_code == 0
    assert view.determinism_class in table.stdout and "torch" in table.stdout

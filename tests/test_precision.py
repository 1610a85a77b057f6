"""`training.precision`: what `auto` resolves to, what doctor shows, what the lock records."""

import pytest

from dlm.actions.diagnostics import precision_view
from dlm.doc.schema import TrainingConfig
from dlm.train.precision import PrecisionSupport, auto_dtype, resolve_precision


@pytest.mark.parametrize(("device", "cuda_bf16", "flags", "expected"), [
    ("cuda", True, (), "bfloat16"),
    ("cuda", False, ("avx512_bf16",), "float32"),  # the GPU trains, not the CPU
    ("cpu", False, ("avx512_bf16",), "bfloat16"),
    ("cpu", False, ("amx_bf16",), "bfloat16"),
    ("cpu", False, (), "float32"),
    ("mps", False, (), "float32"),
])
def test_auto_picks_bf16_only_where_the_hardware_has_it(device, cuda_bf16, flags, expected):
    assert auto_dtype(device, cuda_bf16, flags) == expected


def test_explicit_settings_win_over_the_machine():
    gpu = PrecisionSupport("cuda", True, (), "bfloat16")
    assert resolve_precision("fp32", gpu) == "float32"
    assert resolve_precision("bf16", PrecisionSupport("cpu", False, (), "float32")) == "bfloat16"
    assert resolve_precision("auto", gpu) == "bfloat16"
    with pytest.raises(ValueError):
        resolve_precision("fp16", gpu)


def test_schema_defaults_to_auto_and_refuses_other_names():
    assert TrainingConfig().precision == "auto"
    assert TrainingConfig(precision="fp32").precision == "fp32"
    with pytest.raises(ValueError):
        TrainingConfig(precision="fp16")


def test_doctor_shows_the_cpu_flags_and_the_auto_choice():
    view = precision_view("cpu", frozenset({"avx2", "avx512_bf16", "amx_bf16"}))
    assert view == {"cpu_bf16": ["avx512_bf16", "amx_bf16"], "cuda_bf16": None, "auto": "bfloat16"}
    assert precision_view("cpu", frozenset({"avx2"}))["auto"] == "float32"

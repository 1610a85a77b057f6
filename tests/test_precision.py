"""`training.precision`: what `auto` resolves to, what doctor shows, what the lock records."""

import pytest

from dlm.actions.diagnostics import precision_view
from dlm.doc.schema import TrainingConfig
from dlm.train.precision import PrecisionSupport, auto_dtype, resolve_precision


@pytest.mark.parametrize(
    ("device", "cuda_bf16", "flags", "expected"),
    [
        ("cuda", True, (), "bfloat16"),
        ("cuda", False, ("avx512_bf16",), "float32"),  # the GPU trains, not the CPU
        ("cpu", False, ("avx512_bf16",), "bfloat16"),
        ("cpu", False, ("amx_bf16",), "bfloat16"),
        ("cpu", False, (), "float32"),
        ("mps", False, (), "float32"),
    ],
)
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


def test_a_bf16_run_autocasts_the_step_and_keeps_the_adapter_float32(smollm2_ref, smollm2_tokenizer, tmp_path):
    import numpy as np
    import torch

    from dlm.models import load_model
    from dlm.tokenize.seam import TokenizedRows
    from dlm.train.dataset import PackedDataset, as_hf_dataset
    from dlm.train.lora import Hyperparameters, train_lora

    data = [np.arange(300 + 20 * i, 320 + 20 * i, dtype=np.uint16) for i in range(2)]
    rows = TokenizedRows(
        lengths=np.array([20, 20]),
        n_prompt=np.zeros(2, np.int32),
        keys=["a", "b"],
        read=lambda i: data[i],
        kinds=["prose", "prose"],
    )
    run = Hyperparameters(4, 8, 0.05, ("q_proj",), 1e-3, 1, 1.0, 1, 1, 7, precision="bfloat16")
    seen: list[torch.dtype] = []

    class Sink:
        def on_train_start(self, total_steps):
            pass

        def on_step(self, *args):
            pass

    model = load_model(smollm2_ref)
    hook = model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    result = train_lora(
        model, smollm2_tokenizer, as_hf_dataset(PackedDataset(rows, 32)), run, tmp_path, Sink(), sequence_len=32
    )
    hook.remove()
    assert result.steps == 1 and torch.bfloat16 in seen
    lora = [p for n, p in result.model.named_parameters() if "lora_" in n]
    assert lora and all(p.dtype == torch.float32 for p in lora)

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


def test_dlm_cpu_bf16_0_makes_auto_train_as_a_cpu_without_bf16(monkeypatch):
    from dlm.train.precision import cpu_bf16_flags

    flags = frozenset({"avx2", "avx512_bf16"})
    assert cpu_bf16_flags(flags, {}) == ("avx512_bf16",)
    assert cpu_bf16_flags(flags, {"DLM_CPU_BF16": "0"}) == ()
    assert cpu_bf16_flags(flags, {"DLM_CPU_BF16": "1"}) == ("avx512_bf16",)
    monkeypatch.setenv("DLM_CPU_BF16", "0")
    # doctor still shows what the CPU has, and that auto trains in float32 all the same
    assert precision_view("cpu", flags) == {"cpu_bf16": ["avx512_bf16"], "cuda_bf16": None, "auto": "float32"}


def test_doctor_shows_the_cpu_flags_and_the_auto_choice(monkeypatch):
    monkeypatch.delenv("DLM_CPU_BF16", raising=False)
    view = precision_view("cpu", frozenset({"avx2", "avx512_bf16", "amx_bf16"}))
    assert view == {"cpu_bf16": ["avx512_bf16", "amx_bf16"], "cuda_bf16": None, "auto": "bfloat16"}
    assert precision_view("cpu", frozenset({"avx2"}))["auto"] == "float32"


def test_a_bf16_run_autocasts_the_step_and_keeps_the_adapter_float32(smollm2_ref, smollm2_tokenizer, tmp_path):
    import numpy as np
    import torch

    from dlm.models import load_model
    from dlm.train.dataset import PackedDataset
    from dlm.train.loop import LoopRun, train
    from dlm.train.lora import Hyperparameters
    from tests.tinyllama import token_rows

    rows = token_rows([list(range(300 + 20 * i, 320 + 20 * i)) for i in range(2)])
    hyper = Hyperparameters(4, 8, 0.05, ("q_proj",), 1e-3, 1, 1.0, 1, 1, 7, precision="bfloat16")
    seen: list[torch.dtype] = []

    class Sink:
        def on_train_start(self, total_steps):
            pass

        def on_step(self, *args):
            pass

    model = load_model(smollm2_ref)
    hook = model.model.layers[0].self_attn.q_proj.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    run = LoopRun(hyper, PackedDataset(rows, 32), np.zeros(2, np.int64), sequence_len=32, pad_id=0)
    result = train(model, run, Sink())
    hook.remove()
    assert result.steps == 1 and torch.bfloat16 in seen
    lora = [p for n, p in result.model.named_parameters() if "lora_" in n]
    assert lora and all(p.dtype == torch.float32 for p in lora)

    frozen = dict(result.model.named_parameters())
    assert frozen["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"].dtype == torch.bfloat16
    assert frozen["base_model.model.model.layers.0.mlp.down_proj.weight"].dtype == torch.bfloat16
    assert frozen["base_model.model.model.embed_tokens.weight"].dtype == torch.bfloat16


def _lora_step(hold: bool):
    """One forward and backward of a tiny LoRA model under bf16 autocast: the loss and
    the LoRA gradients. Without `hold`, the embedding table is rounded to bfloat16 values
    and kept in float32: what a held table's lookups return."""
    import torch
    from peft import LoraConfig, get_peft_model

    from dlm.train.lm_loss import causal_lm_token_nll
    from dlm.train.precision import hold_frozen_weights
    from tests.tinyllama import tiny_llama

    model = get_peft_model(
        tiny_llama(tie_word_embeddings=True, num_hidden_layers=2),
        LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "up_proj"], init_lora_weights=False),
    )
    if hold:
        converted = hold_frozen_weights(model, "bfloat16")
    else:
        table = model.get_input_embeddings().weight
        table.data = table.data.to(torch.bfloat16).to(torch.float32)
        converted = 0
    ids = torch.arange(3, 27).view(2, 12)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        nll = causal_lm_token_nll(model, {"input_ids": ids, "labels": ids})
    loss = nll.sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}
    return model, converted, loss.detach(), grads


def test_frozen_weights_held_in_bf16_train_the_same_bits_under_autocast():
    import torch

    plain, _, loss, grads = _lora_step(hold=False)
    held, converted, held_loss, held_grads = _lora_step(hold=True)
    assert torch.equal(loss, held_loss)
    assert grads.keys() == held_grads.keys() and grads
    assert all(torch.equal(grads[n], held_grads[n]) for n in grads)
    params = dict(held.named_parameters())
    # 2 layers x 7 projections of a 16-wide model, and the embedding table the head shares
    frozen = [p for n, p in plain.named_parameters() if "proj" in n and "lora_" not in n]
    table = plain.get_input_embeddings().weight
    assert len(frozen) == 14 and converted == 4 * (sum(p.numel() for p in frozen) + table.numel())
    assert all(p.dtype == torch.float32 for n, p in params.items() if "lora_" in n)
    assert params["base_model.model.model.embed_tokens.weight"].dtype == torch.bfloat16
    head = held.get_base_model().lm_head.weight
    assert head is held.get_base_model().model.embed_tokens.weight  # still tied
    assert params["base_model.model.model.layers.1.mlp.down_proj.weight"].dtype == torch.bfloat16


def test_a_held_embedding_table_looks_up_float32_vectors():
    import torch

    from dlm.train.precision import hold_frozen_weights
    from tests.tinyllama import tiny_llama

    model = tiny_llama().requires_grad_(False)
    table = model.get_input_embeddings()
    expected = table.weight.detach().to(torch.bfloat16).to(torch.float32)[torch.tensor([3, 5])]
    hold_frozen_weights(model, "bfloat16")
    hold_frozen_weights(model, "bfloat16")  # a second call adds no second hook
    assert table.weight.dtype == torch.bfloat16 and len(table._forward_hooks) == 1
    out = table(torch.tensor([3, 5]))
    assert out.dtype == torch.float32 and torch.equal(out, expected)


def test_a_float32_run_holds_its_weights_as_loaded():
    import torch

    from dlm.train.precision import hold_frozen_weights
    from tests.tinyllama import tiny_llama

    model = tiny_llama()
    before = {n: p.data_ptr() for n, p in model.named_parameters()}
    assert hold_frozen_weights(model, "float32") == 0
    assert {n: p.data_ptr() for n, p in model.named_parameters()} == before
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_training_device_is_the_device_auto_is_chosen_for(monkeypatch):
    import torch

    from dlm.train.precision import detect_support, training_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert training_device() == "cpu" == detect_support().device
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    support = detect_support()
    # scoring follows training onto the GPU, so a bf16 score never runs the CPU's bf16 kernels
    assert training_device() == "cuda" == support.device
    assert support.auto == "bfloat16"


def test_load_model_puts_the_base_model_on_the_device_asked(smollm2_ref):
    from dlm.models import load_model

    on_cpu = load_model(smollm2_ref)
    assert {p.device.type for p in on_cpu.parameters()} == {"cpu"}
    moved = load_model(smollm2_ref, device="meta")  # any device but the CPU: torch's shape-only one
    assert {p.device.type for p in moved.parameters()} == {"meta"}

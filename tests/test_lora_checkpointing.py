"""Gradient checkpointing: the rule that turns it off while activations fit the device, the
memory figures of `dlm.train.lora` (device memory, peak RSS), and proof that checkpointing
changes no number of the trained adapter."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from tinyllama import tiny_hyper, train_tiny

from dlm.train.lora import (
    ACTIVATION_SHARE,
    activation_bytes,
    device_memory,
    gradient_checkpointing,
    peak_rss_bytes,
    physical_memory,
    run_activation_bytes,
)

SMOLLM2 = SimpleNamespace(
    hidden_size=576, num_hidden_layers=30, num_attention_heads=9, vocab_size=49152, intermediate_size=1536
)


def test_activation_estimate_matches_the_formula_and_grows_with_tokens():
    per_layer = 6 * 576 + 4 * 1536 + 9 * 512
    assert activation_bytes(SMOLLM2, 8, 512) == 4 * 8 * 512 * (30 * per_layer + 576)
    assert activation_bytes(SMOLLM2, 4, 1024) > 2 * activation_bytes(SMOLLM2, 4, 512)  # attention weights grow as T^2
    assert activation_bytes(SMOLLM2, 8, 512) == 2 * activation_bytes(SMOLLM2, 4, 512)
    no_mlp_size = SimpleNamespace(**{k: v for k, v in vars(SMOLLM2).items() if k != "intermediate_size"})
    assert activation_bytes(no_mlp_size, 1, 64) == 4 * 64 * (30 * (6 * 576 + 4 * 4 * 576 + 9 * 64) + 576)


def test_checkpointing_is_off_while_activations_fit_the_device():
    gib = 1 << 30
    assert gradient_checkpointing(activation_bytes(SMOLLM2, 4, 128), 16 * gib) is False
    assert gradient_checkpointing(int(ACTIVATION_SHARE * 16 * gib) + 1, 16 * gib) is True
    assert gradient_checkpointing(None, 16 * gib) is True  # no estimate: keep the safe default
    assert gradient_checkpointing(1, None) is True  # unknown memory
    # a 24 GiB card holds the demo's activations; 8 x 4096 tokens of SmolLM2 do not fit a quarter of it
    assert gradient_checkpointing(activation_bytes(SMOLLM2, 4, 128), 24 * gib) is False
    assert gradient_checkpointing(activation_bytes(SMOLLM2, 8, 4096), 24 * gib) is True


def test_device_memory_is_ram_off_cuda():
    assert device_memory("cpu") == physical_memory()
    assert device_memory("mps") == physical_memory()


def test_physical_memory_is_positive_where_the_os_says():
    memory = physical_memory()
    assert memory is None or memory > 0


def train_once(forced: bool | None, sequence_len: int = 16) -> tuple[bool, dict[str, torch.Tensor]]:
    """Three steps of a small Llama with LoRA dropout 0.1; (whether it checkpointed, the LoRA weights)."""
    gen = torch.Generator().manual_seed(1)
    rows = [torch.randint(3, 64, (16,), generator=gen).tolist() for _ in range(8)]
    hyper = tiny_hyper(lora_dropout=0.1, max_steps=3, gradient_checkpointing=forced)
    result = train_tiny(rows, hyper=hyper, sequence_len=sequence_len)
    lora = {k: v.detach().clone() for k, v in result.model.state_dict().items() if "lora_" in k}
    return bool(result.model.get_base_model().is_activation_checkpointing), lora


def test_an_adapter_trained_with_checkpointing_is_bit_identical():
    on, with_ckpt = train_once(True)
    off, without = train_once(None)  # the rule: a few KB of activations fit, so off
    assert on is True and off is False
    assert with_ckpt.keys() == without.keys() and with_ckpt
    assert all(torch.equal(with_ckpt[k], without[k]) for k in with_ckpt)  # lora dropout 0.1 included
    assert any(not torch.equal(v, torch.zeros_like(v)) for k, v in without.items() if "lora_B" in k)  # it trained
    assert train_once(False)[0] is False


def test_the_document_key_reaches_the_hyperparameters_and_stays_out_of_the_lock():
    from dlm.actions.training.plan import hyperparameters
    from dlm.actions.training.types import TrainOptions
    from dlm.doc.schema import TrainingConfig
    from dlm.train.lora import lock_hyperparameters

    picked = {
        value: hyperparameters(TrainingConfig(gradient_checkpointing=value, precision="fp32"), TrainOptions())
        for value in ("auto", True, False)
    }
    assert [picked[v].gradient_checkpointing for v in ("auto", True, False)] == [None, True, False]
    locks = {str(v): lock_hyperparameters(h, 128, True, None) for v, h in picked.items()}
    assert "gradient_checkpointing" not in locks["True"] and locks["True"] == locks["False"] == locks["auto"]


def test_peak_rss_is_the_kernels_high_water_mark():
    if not sys.platform.startswith("linux"):
        pytest.skip("VmHWM is Linux's")
    ballast = bytearray(64 * 2**20)  # touched: the peak is at least this much above the start
    ballast[::4096] = b"x" * len(ballast[::4096])
    status = Path("/proc/self/status").read_text()
    hwm = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) * 1024
    assert abs(peak_rss_bytes() - hwm) < 16 * 2**20
    assert peak_rss_bytes() >= 64 * 2**20
    del ballast


def test_a_run_of_short_examples_is_estimated_by_them_not_by_its_sequence_len():
    gib = 1 << 30
    lengths = [60, 90, 597, 120, 180, 170]  # Q/A pairs and one source window, `sequence_len` 2048
    estimate = run_activation_bytes(SMOLLM2, 4, lengths, 2048)
    # every micro-batch fits in one row: at most the four longest, 597 + 180 + 170 + 120 -> 1152
    assert estimate == activation_bytes(SMOLLM2, 1, 1152)
    assert gradient_checkpointing(estimate, 24 * gib) is False
    assert gradient_checkpointing(activation_bytes(SMOLLM2, 4, 2048), 24 * gib) is True  # the old estimate
    # examples that do not fit one row together: four rows of the longest, or one full row
    assert run_activation_bytes(SMOLLM2, 4, [2048, 300], 2048) == activation_bytes(SMOLLM2, 4, 2048)
    assert run_activation_bytes(SMOLLM2, 4, [700, 700, 700], 2048) == max(
        activation_bytes(SMOLLM2, 4, 704), activation_bytes(SMOLLM2, 1, 2048)
    )

"""`training.replay_loss: kl` (`dlm.train.replay_kl`) on a tiny Llama: replay positions
score KL(p_base || p_adapter), 0 while the adapter is the base; other rows keep their
NLL; the gradient is the reference KL's; the loop trains the same bytes run to run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from tinyllama import tiny_hyper, tiny_llama, train_tiny

from dlm.train.data import KINDS, collate
from dlm.train.lm_loss import causal_lm_of
from dlm.train.model import ModelPlan, prepare_model
from dlm.train.replay_kl import replay_inputs, weigh_replay

GEN = torch.Generator().manual_seed(5)
ROWS = [torch.randint(3, 64, (int(n),), generator=GEN).numpy() for n in (10, 7, 9, 12)]
KINDS_OF = ["prose", "replay", "instruction", "replay"]


def mixed_batch(packed: bool) -> Any:
    """The four rows, one example a row (windows) or as packed blocks of two examples
    each (a prose block, a replay block), with their per-token kinds."""
    kinds = [np.full(len(r), KINDS.index(k)) for r, k in zip(ROWS, KINDS_OF, strict=True)]
    if not packed:
        examples = [{"input_ids": r, "labels": r.copy()} for r in ROWS]
        return collate(examples, 0, 16, kinds)
    blocks, block_kinds = [], []
    for pair in ((0, 2), (1, 3)):
        ids = np.concatenate([ROWS[i] for i in pair])
        positions = np.concatenate([np.arange(len(ROWS[i])) for i in pair])
        labels = ids.copy()
        labels[len(ROWS[pair[0]])] = -100  # no loss across the examples' boundary
        blocks.append({"input_ids": ids, "labels": labels, "position_ids": positions})
        block_kinds.append(np.concatenate([kinds[i] for i in pair]))
    return collate(blocks, 0, 32, block_kinds)


def fresh_model(precision: str = "float32") -> Any:
    return prepare_model(tiny_llama(64, max_position_embeddings=64), ModelPlan(tiny_hyper(precision=precision)))


def autocast(precision: str) -> Any:
    return torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16")


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_kl_is_zero_where_the_adapter_is_the_base_and_other_rows_keep_their_nll(packed: bool, precision: str):
    batch = mixed_batch(packed)
    model = fresh_model(precision)  # LoRA's B is 0: the adapter is the base
    inputs = replay_inputs(batch)
    replay = inputs["replay_rows"]
    with autocast(precision):
        ce = model(**batch.inputs).reshape(-1)
        kl = model(**inputs).reshape(-1)
    assert replay.numel() and bool((batch.kinds[replay] == KINDS.index("replay")).all())
    assert torch.equal(kl[replay], torch.zeros_like(kl[replay]))  # the loss term is exactly the KL
    assert bool((ce[replay] > 1.0).all())  # where cross-entropy is not 0
    others = inputs["loss_rows"]
    assert others.numel() and torch.equal(kl[others], ce[others])  # the other rows' NLL, bit for bit
    rest = torch.ones_like(kl, dtype=torch.bool)
    rest[batch.inputs["loss_rows"]] = False
    assert not kl[rest].any()  # no loss where none is taken


def moved(model: Any) -> None:
    """One SGD step on the prose row's cross-entropy: the adapter leaves the base."""
    prose = collate([{"input_ids": ROWS[0], "labels": ROWS[0].copy()}], 0, 16)
    params = [p for p in model.parameters() if p.requires_grad]
    model(**prose.inputs).sum().backward()
    with torch.no_grad():
        for p in params:
            p -= 0.5 * p.grad
            p.grad = None


def reference_kl(model: Any, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """KL(p_base || p_adapter) at `replay_rows` from the model's own logits, by autograd."""
    features = {k: v for k, v in inputs.items() if k in ("input_ids", "attention_mask", "position_ids")}
    peft_model = model.peft_model
    logits = peft_model(**features).logits.reshape(-1, 64)
    with torch.no_grad(), peft_model.disable_adapter():
        base = peft_model(**features).logits.reshape(-1, 64)
    rows = inputs["replay_rows"]
    return F.kl_div(logits[rows].log_softmax(-1), base[rows].log_softmax(-1), log_target=True, reduction="none").sum(-1)


def lora_grads(model: Any) -> dict[str, torch.Tensor]:
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return grads


@pytest.mark.parametrize("fused", [True, False])
def test_the_kl_and_its_gradient_are_the_reference_after_the_adapter_moved(fused: bool):
    model = fresh_model()
    moved(model)
    if not fused:  # a model type the fused loss does not take: the KL from its own logits
        causal_lm_of(model.peft_model).config.model_type = "not-fused"
    inputs = replay_inputs(mixed_batch(packed=False))
    rows = inputs["replay_rows"]
    kl = model(**inputs).reshape(-1)[rows]
    kl.sum().backward()
    got = lora_grads(model)
    want_kl = reference_kl(model, inputs)
    want_kl.sum().backward()
    want = lora_grads(model)
    assert bool((kl > 0).all()) and torch.allclose(kl, want_kl, rtol=1e-4, atol=1e-7)
    assert got.keys() == want.keys() and any(g.abs().sum() > 0 for g in got.values())
    for name, grad in got.items():
        assert bool(torch.isfinite(grad).all())
        assert torch.allclose(grad, want[name], rtol=1e-3, atol=1e-7), name


def test_the_base_pass_leaves_the_dropout_clock_the_modes_and_the_trained_weights_alone():
    model = prepare_model(tiny_llama(64, max_position_embeddings=64), ModelPlan(tiny_hyper(lora_dropout=0.1)))
    moved(model)
    model.clock.tick()
    index, forwards = model.clock.index, model.clock.forwards
    modes = {n: m.training for n, m in model.named_modules()}
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    model(**replay_inputs(mixed_batch(packed=False)))
    assert (model.clock.index, model.clock.forwards) == (index, forwards)
    assert {n: m.training for n, m in model.named_modules()} == modes
    assert {n for n, p in model.named_parameters() if p.requires_grad} == trained and trained


KIND_ROWS = [r.tolist() for r in ROWS] * 2
ROW_KINDS = KINDS_OF * 2


@pytest.mark.parametrize("packing", [False, True])
def test_a_kl_run_trains_the_same_bytes_twice_and_other_bytes_than_ce(packing: bool):
    hyper = tiny_hyper(max_steps=3, batch_size=2, lora_dropout=0.1, replay_loss="kl")
    runs = [train_tiny(KIND_ROWS, hyper=hyper, kinds=ROW_KINDS, packing=packing, sequence_len=24) for _ in range(2)]
    ce = train_tiny(
        KIND_ROWS, hyper=replace(hyper, replay_loss="ce"), kinds=ROW_KINDS, packing=packing, sequence_len=24
    )
    weights = [{k: v for k, v in r.model.state_dict().items() if "lora_" in k} for r in (*runs, ce)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert any(not torch.equal(weights[0][k], weights[2][k]) for k in weights[0])
    assert all(np.isfinite(r.train_loss) for r in (*runs, ce))


def test_accumulating_a_kl_step_equals_one_bigger_micro_batch_up_to_rounding():
    # the KL sits in the per-token tensor: the loss divisor and accumulation treat it as NLL
    one = tiny_hyper(max_steps=1, batch_size=4, replay_loss="kl")
    two = replace(one, batch_size=2, gradient_accumulation_steps=2)
    rows, kinds = KIND_ROWS[:4], ROW_KINDS[:4]
    whole = train_tiny(rows, hyper=one, kinds=kinds, sequence_len=16).model.state_dict()
    accumulated = train_tiny(rows, hyper=two, kinds=kinds, sequence_len=16).model.state_dict()
    assert all(torch.allclose(accumulated[k], whole[k], atol=1e-6) for k in whole if "lora_" in k)


def test_only_micro_batches_with_replay_positions_run_the_base_and_only_on_their_examples():
    model = fresh_model()
    seen: list[int] = []
    embed = causal_lm_of(model.peft_model).get_input_embeddings()
    embed.register_forward_hook(lambda _m, args, _out: seen.append(int(args[0].shape[0])))
    no_replay = collate(
        [{"input_ids": r, "labels": r.copy()} for r in (ROWS[0], ROWS[2])],
        0,
        16,
        [np.zeros(len(ROWS[0]), np.int64), np.full(len(ROWS[2]), KINDS.index("instruction"))],
    )
    model(**replay_inputs(no_replay))
    assert seen == [2]  # the adapter's forward alone
    seen.clear()
    model(**replay_inputs(mixed_batch(packed=False)))
    assert seen == [4, 2]  # then the base, on the two replay examples of four


def test_the_replay_weight_multiplies_the_replay_positions_alone():
    batch = mixed_batch(packed=False)
    nll = torch.rand(batch.inputs["input_ids"].shape, generator=GEN)
    weighed = weigh_replay(nll, batch.kinds, 3.0)
    is_replay = (batch.kinds == KINDS.index("replay")).view(nll.shape)
    assert bool(is_replay.any()) and bool((~is_replay).any())
    assert torch.equal(weighed[is_replay], nll[is_replay] * 3.0) and torch.equal(weighed[~is_replay], nll[~is_replay])
    assert weigh_replay(nll, batch.kinds, 1.0) is nll


@pytest.mark.parametrize("replay_loss", ["ce", "kl"])
def test_a_replay_weight_trains_other_bytes_only_where_replay_rows_are(replay_loss: str):
    # ce moves the adapter from the first step; the KL's gradient is 0 until the adapter has moved
    hyper = tiny_hyper(max_steps=1 if replay_loss == "ce" else 3, batch_size=2, replay_loss=replay_loss)

    def lora(weight: float, kinds: list[str]) -> tuple[dict[str, torch.Tensor], float]:
        run = train_tiny(KIND_ROWS, hyper=replace(hyper, replay_weight=weight), kinds=kinds, sequence_len=24)
        return {k: v for k, v in run.model.state_dict().items() if "lora_" in k}, run.train_loss

    (one, loss_one), (two, loss_two) = lora(1.0, ROW_KINDS), lora(2.0, ROW_KINDS)
    assert any(not torch.equal(one[k], two[k]) for k in one)
    if replay_loss == "ce":  # one step from the same weights: the loss is reported without the factor
        assert loss_one == pytest.approx(loss_two)
    no_replay = ["prose" if k == "replay" else k for k in ROW_KINDS]
    plain, weighed = lora(1.0, no_replay)[0], lora(2.0, no_replay)[0]
    assert all(torch.equal(plain[k], weighed[k]) for k in plain)

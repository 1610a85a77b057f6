"""One row per micro-batch (`dlm.train.shared_prefix`): the shared prefix once, each
example after it seeing the prefix and itself; the same per-example NLL, gradient and
replay KL as one example per row, on a tiny Llama with grouped key/value heads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinyllama import assert_same_grads, tiny_hyper, tiny_llama

from dlm.train.data import KINDS, collate
from dlm.train.model import ModelPlan, prepare_model
from dlm.train.replay_kl import replay_inputs
from dlm.train.shared_prefix import collate_row, first_loss, micro_batch, row_mask, shared_prefix

GEN = torch.Generator().manual_seed(11)
SYSTEM = [1, 2, 3, 4, 5]  # every chat example's system turn


def chat(question: int, answer: int) -> dict[str, np.ndarray]:
    """A chat-shaped example: the system turn, a question, then an answer that carries loss."""
    q = torch.randint(6, 64, (question,), generator=GEN).tolist()
    a = torch.randint(6, 64, (answer,), generator=GEN).tolist()
    ids = np.array(SYSTEM + q + a)
    labels = np.array([-100] * (len(SYSTEM) + question) + a)
    return {"input_ids": ids, "labels": labels}


EXAMPLES = [chat(4, 6), chat(7, 3), chat(2, 9), chat(5, 5)]
KINDS_OF = ["instruction", "replay", "synth", "replay"]


def kinds(examples: list[dict[str, np.ndarray]], names: list[str]) -> list[np.ndarray]:
    return [np.full(len(e["input_ids"]), KINDS.index(k)) for e, k in zip(examples, names, strict=True)]


def model(precision: str = "float32") -> Any:
    tiny = tiny_llama(64, max_position_embeddings=128, num_attention_heads=2, num_key_value_heads=1)
    return prepare_model(tiny, ModelPlan(tiny_hyper(precision=precision)))


def moved(m: Any) -> None:
    """Give LoRA's B weights values, so the adapter is no longer the base."""
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.3)


def test_the_prefix_is_what_every_example_starts_with_and_stops_before_any_loss():
    assert shared_prefix(EXAMPLES) == len(SYSTEM)  # the questions differ after the system turn
    copies = [EXAMPLES[0], EXAMPLES[0]]
    # two copies of one example share everything up to the token before the answer: its
    # first answer token is still predicted inside each copy's own tail
    assert shared_prefix(copies) == first_loss(EXAMPLES[0]["labels"]) - 1 == len(SYSTEM) + 4 - 1
    prose = {"input_ids": np.array([1, 2, 3]), "labels": np.array([1, 2, 3])}  # every token a target
    assert shared_prefix([prose, prose]) == 0
    assert shared_prefix([EXAMPLES[0], prose]) == 0


def test_a_row_holds_the_prefix_once_then_each_example_at_its_own_positions():
    batch = collate_row(EXAMPLES, pad_id=0, limit=128, token_kinds=kinds(EXAMPLES, KINDS_OF))
    assert batch is not None and batch.segments is not None
    p = len(SYSTEM)
    sizes = [len(e["input_ids"]) for e in EXAMPLES]
    total = p + sum(n - p for n in sizes)
    assert (batch.tokens, batch.processed) == (total, batch.inputs["input_ids"].shape[1])
    ids, positions = batch.inputs["input_ids"][0], batch.inputs["position_ids"][0]
    segments = batch.segments.numpy()
    assert ids[:p].tolist() == SYSTEM and positions[:p].tolist() == list(range(p))
    for k, e in enumerate(EXAMPLES):
        span = np.flatnonzero(segments == k + 1)
        assert ids[span].tolist() == e["input_ids"][p:].tolist()
        assert positions[span].tolist() == list(range(p, len(e["input_ids"])))  # as in its own row
    assert (segments[total:] == -1).all()
    # the same loss positions, by kind, as one example per row
    windows = collate(EXAMPLES, 0, 128, kinds(EXAMPLES, KINDS_OF))
    assert len(batch.inputs["loss_rows"]) == len(windows.inputs["loss_rows"])
    assert np.bincount(batch.kinds.numpy(), minlength=len(KINDS) + 1)[: len(KINDS)].tolist() == (
        np.bincount(windows.kinds.numpy(), minlength=len(KINDS) + 1)[: len(KINDS)].tolist()
    )


def test_the_mask_lets_a_tail_see_the_prefix_and_itself_and_padding_only_itself():
    segments = np.array([0, 0, 1, 1, 2, 2, -1])
    mask = row_mask(segments)[0, 0].numpy()
    assert mask[3].tolist() == [True, True, True, True, False, False, False]
    assert mask[4].tolist() == [True, True, False, False, True, False, False]  # not tail 1
    assert mask[1].tolist() == [True, True, False, False, False, False, False]
    assert mask[6].tolist() == [False] * 6 + [True]


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_each_example_scores_and_trains_as_in_its_own_row(precision: str):
    m = model(precision)
    moved(m)
    m.eval()  # no dropout: the two layouts draw different masks
    windows = collate(EXAMPLES, 0, 128)
    row = collate_row(EXAMPLES, 0, 128)
    assert row is not None and row.segments is not None
    tol = {"float32": 1e-5, "bfloat16": 2e-2}[precision]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16"):
        a = m(**windows.inputs)
        b = m(**row.inputs)
    per_window = a.sum(dim=1)
    per_tail = torch.stack([b[0][row.segments == k + 1].sum() for k in range(len(EXAMPLES))])
    assert torch.allclose(per_tail, per_window, rtol=tol, atol=tol)
    assert_same_grads(m, a, b, rtol=tol * 10, atol=tol)


def test_the_replay_kl_of_a_row_is_the_one_of_its_own_rows_and_its_base_pass_reads_only_the_replay_tails():
    m = model()
    moved(m)
    m.eval()
    windows = replay_inputs(collate(EXAMPLES, 0, 128, kinds(EXAMPLES, KINDS_OF)))
    batch = collate_row(EXAMPLES, 0, 128, kinds(EXAMPLES, KINDS_OF))
    assert batch is not None and batch.segments is not None
    row = replay_inputs(batch)
    p = len(SYSTEM)
    replay_tails = sum(len(EXAMPLES[i]["input_ids"]) - p for i in (1, 3))
    assert row["base_input_ids"].shape == (1, p + replay_tails)
    seen: list[int] = []
    hook = (
        m.peft_model.get_base_model()
        .get_input_embeddings()
        .register_forward_hook(lambda _m, args, _out: seen.append(int(args[0].numel())))
    )
    kl_windows = m(**windows).reshape(-1)[windows["replay_rows"]]
    kl_row = m(**row).reshape(-1)[row["replay_rows"]]
    hook.remove()
    assert seen[-1] == p + replay_tails  # the row's base pass: the prefix and the two replay tails
    assert bool((kl_row > 0).all()) and torch.allclose(kl_row, kl_windows, rtol=1e-4, atol=1e-6)


def test_a_micro_batch_too_long_for_one_row_keeps_one_example_per_row():
    fits = micro_batch(EXAMPLES, 0, 128)
    assert fits.segments is not None and fits.inputs["input_ids"].shape[0] == 1
    longest = max(len(e["input_ids"]) for e in EXAMPLES)
    too_long = micro_batch(EXAMPLES, 0, longest + 2)  # each fits, together they do not
    assert too_long.segments is None and too_long.inputs["input_ids"].shape[0] == len(EXAMPLES)
    assert collate_row(EXAMPLES, 0, longest + 2) is None
    block = {"input_ids": np.arange(1, 9), "labels": np.arange(1, 9), "position_ids": np.r_[0:4, 0:4]}
    assert micro_batch([block], 0, 16).segments is None  # packed blocks keep their layout

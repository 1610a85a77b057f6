"""A run's tokens counted before step 1 (`dlm.train.workload`) are the tokens the loop
trains (`dlm.train.loop`), step by step, in every layout, on a tiny Llama."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tinyllama import SMALLEST, tiny_hyper, token_rows, train_tiny

from dlm.train.data import KINDS
from dlm.train.dataset import build_dataset
from dlm.train.loop import LoopRun
from dlm.train.workload import step_tokens, step_work

GEN = torch.Generator().manual_seed(5)
PREFIX = [7, 8, 9, 10, 11]  # a system turn every chat example starts with


def chat_rows(n: int) -> tuple[list[list[int]], list[int]]:
    """`n` rows of the shared prefix, a question and an answer; their prompt lengths."""
    rows, prompts = [], []
    for _ in range(n):
        question = torch.randint(12, 64, (int(torch.randint(2, 5, (1,), generator=GEN)),), generator=GEN).tolist()
        answer = torch.randint(12, 64, (int(torch.randint(3, 7, (1,), generator=GEN)),), generator=GEN).tolist()
        rows.append(PREFIX + question + answer)
        prompts.append(len(PREFIX) + len(question))
    return rows, prompts


class Tokens:
    """A sink that keeps each step's cumulative tokens."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def on_train_start(self, total: int) -> None:
        pass

    def on_step(self, step, loss, rate, lr, tokens_seen, seconds) -> None:  # noqa: ANN001
        self.seen.append(tokens_seen)


def loop_view(
    rows: list[list[int]], prompts: list[int] | None, packing: bool, sequence_len: int, kinds=None, **hyper
) -> LoopRun:
    kinds = kinds or ["instruction"] * len(rows)
    tokenized = token_rows(rows, kinds, prompts)
    return LoopRun(
        hyper=tiny_hyper(**hyper),
        dataset=build_dataset(tokenized, sequence_len, packing),
        row_kinds=np.array([KINDS.index(k) for k in kinds], np.int64),
        sequence_len=sequence_len,
        pad_id=0,
    )


@pytest.mark.parametrize(
    ("packing", "sequence_len"),
    [(False, 64), (False, 16), (True, 32)],
    ids=["one-row-per-micro-batch", "one-row-per-example", "packed"],
)
def test_the_planned_tokens_of_each_step_are_the_tokens_the_loop_trains(packing: bool, sequence_len: int):
    rows, prompts = chat_rows(12)
    hyper = {"max_steps": 7, "batch_size": 3}  # 7 steps of 3 cross an epoch of 12
    planned = step_tokens(loop_view(rows, prompts, packing, sequence_len, **hyper))
    sink = Tokens()
    train_tiny(
        rows,
        sink=sink,
        kinds=["instruction"] * len(rows),
        packing=packing,
        sequence_len=sequence_len,
        hyper=tiny_hyper(**hyper),
        n_prompt=prompts,
    )
    assert len(planned) == 7
    assert np.diff([0, *sink.seen]).tolist() == planned.tolist()


def test_a_row_of_chat_examples_counts_their_shared_prefix_once():
    rows, prompts = chat_rows(12)
    view = loop_view(rows, prompts, False, 64, max_steps=4, batch_size=3)  # one epoch: every example once
    lengths = sum(len(r) for r in rows)
    # four micro-batches of three: each holds the prefix once instead of three times
    assert int(step_tokens(view).sum()) == lengths - 4 * 2 * len(PREFIX)


def test_ranks_plan_their_own_share_of_a_step():
    rows, prompts = chat_rows(16)
    one = step_tokens(loop_view(rows, prompts, False, 64, max_steps=3, batch_size=2, gradient_accumulation_steps=2))
    ranks = []
    for rank in (0, 1):
        view = loop_view(rows, prompts, False, 64, max_steps=3, batch_size=2)
        ranks.append(step_tokens(LoopRun(**{**view.__dict__, "rank": rank, "world_size": 2})))
    assert (ranks[0] + ranks[1]).tolist() == one.tolist()
    assert ranks[0].tolist() != ranks[1].tolist()


CONFIG = SimpleNamespace(**SMALLEST, vocab_size=64)  # the tiny Llama's: hidden 16, MLP 32, one layer


def test_the_work_of_a_step_is_its_decoder_passes_head_and_attention():
    rows, prompts = chat_rows(1)
    view = loop_view(rows, prompts, False, 64, max_steps=1, batch_size=1)
    tokens, work = step_work(view, CONFIG)
    weights = 16 * (2 * 16 + 2 * 16) + 3 * 16 * 32  # one layer: q, k, v, o and the MLP
    n, width = len(rows[0]), 16  # one row, rounded up to a multiple of 8 from 16 (`padded_length`)
    loss = n - prompts[0]
    assert tokens.tolist() == [n]
    expected = 2 * width + 2 * (64 * 16 / weights) * loss + 3 * (2 * 16 / weights) * width**2
    assert work[0] == pytest.approx(expected)


def test_a_step_of_replay_rows_costs_the_base_pass_with_kl_only():
    rows, prompts = chat_rows(8)
    kinds = ["replay"] * 8
    kl = step_work(loop_view(rows, prompts, False, 64, kinds, max_steps=2, batch_size=4), CONFIG)
    ce = step_work(loop_view(rows, prompts, False, 64, kinds, max_steps=2, batch_size=4, replay_loss="ce"), CONFIG)
    assert kl[0].tolist() == ce[0].tolist()  # the same tokens
    assert (kl[1] > ce[1]).all()  # and a forward of the base model over them besides

"""A micro-batch of windows as one row: the examples' shared prefix once, then each example.

Every chat example of a document starts with the same tokens: the chat template's
system turn (SmolLM2's default system prompt is 21 tokens) before the question. In the
one-example-per-row layout (`dlm.train.data.collate`) a micro-batch of `B` examples
computes that prefix `B` times and pads every row to the longest. `collate_row` lays the
micro-batch out as one row instead:

    [prefix][tail of example 1][tail of example 2] ... [padding]

where the prefix is the longest run of tokens every example starts with (`shared_prefix`)
and each tail is the rest of its example. A 4-D attention mask (`row_mask`) lets each
tail attend to the prefix and, causally, to itself, never to another tail, and each
tail's `position_ids` continue from the prefix's, so every position sees exactly the
tokens and positions it sees in its own row: each example's NLL is the same function of
the weights in either layout, up to floating-point rounding, and the gradient is their
sum (prefix sharing with a custom mask, as Wang and Hegde (2024), "Accelerating Direct
Preference Optimization with Prefix Sharing", do for a prompt's two responses). What
changes is the work: the prefix is computed once and nothing but the width's rounding is
padded.

The prefix never takes a position whose next label carries loss: it stops before the
first example's first loss position (`first_loss`), so a loss is always computed inside
its own example's tail, and copies of one example in a micro-batch are scored once each.
A tail's first label is never a target (its previous position belongs to another
segment), as an example's first token is not in its own row.

The row's width is `padded_length` of its tokens (the shapes rule of
`dlm.train.data`); a micro-batch whose row would pass the run's `sequence_len` keeps the
one-example-per-row layout (long source windows), so no row is longer than the longest
sequence the run allows. Packed blocks (`position_ids` already set) keep their layout.

`Batch.segments` marks each position (0: the prefix, k: the k-th tail, -1: padding); the
replay KL's base pass (`dlm.train.replay_kl.replay_inputs`) reads the prefix and the tails
that hold replay positions from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import torch

from dlm.train.data import KINDS, Batch, collate, padded_length
from dlm.train.row_blocks import attention_pairs, row_blocks

# the micro-batch layout of windows and how its row attends (`dlm.train.row_blocks`: other
# last bits than under the row's mask), recorded in the determinism lock (`dlm.train.lora`)
ROW_MODE = "shared-prefix-row-attention-blocks"


def first_loss(labels: np.ndarray) -> int:
    """Index of the first label after position 0 that carries loss (not -100), or the
    example's length when none does. labels: 1-D int [n]."""
    hit = np.flatnonzero(np.asarray(labels)[1:] != -100)
    return int(hit[0]) + 1 if hit.size else len(labels)


def shared_prefix(examples: Sequence[dict[str, np.ndarray]]) -> int:
    """Tokens every example starts with that the row computes once: the longest common
    prefix of `input_ids`, shortened so that no prefix position predicts a loss-carrying
    label (`first_loss` - 1) and every example keeps at least one token of its own."""
    ids = [np.asarray(e["input_ids"]) for e in examples]
    limit = min(min(first_loss(e["labels"]) - 1, len(e["input_ids"]) - 1) for e in examples)
    limit = max(limit, 0)
    head = ids[0][:limit]
    for other in ids[1:]:
        differ = np.flatnonzero(other[: len(head)] != head)
        if differ.size:
            head = head[: int(differ[0])]
    return len(head)


def row_mask(segments: np.ndarray) -> torch.Tensor:
    """bool [1, 1, n, n]: query `i` attends key `j` when `j <= i` and `j` is in the prefix
    (segment 0) or in `i`'s own segment; a padding position (segment -1) attends only to
    itself, so no query row is empty. segments: 1-D int [n]."""
    n = len(segments)
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    seg_q, seg_k = segments[:, None], segments[None, :]
    allowed = (j <= i) & (seg_q >= 0) & (seg_k >= 0) & ((seg_k == 0) | (seg_k == seg_q))
    allowed |= i == j
    return torch.from_numpy(allowed)[None, None]


def collate_row(
    examples: Sequence[dict[str, np.ndarray]],
    pad_id: int,
    limit: int | None = None,
    token_kinds: Sequence[np.ndarray] | None = None,
) -> Batch | None:
    """`examples` (windows: 1-D int arrays `input_ids` and `labels`) as one row (module
    docstring), or None when the row would be longer than `limit` tokens.

    Returns:
        A `Batch` with int64 [1, n] `input_ids`, `labels` (-100 in the prefix, at each
        tail's first position and in the padding), `position_ids` (each tail continues
        from the prefix), bool [1, 1, n, n] `attention_mask` (`row_mask`), int64
        `loss_rows`, the row's attention blocks where they pay
        (`dlm.train.row_blocks.row_blocks`), and int64 [n] `segments`; `tokens` counts
        the prefix once.

    Raises:
        ValueError: an empty batch, or a packed block among the examples.
    """
    if not examples:
        raise ValueError("cannot collate an empty batch")
    if any("position_ids" in e for e in examples):
        raise ValueError("packed blocks keep their own layout")
    fit = _row_fit(examples, limit)
    if fit is None:
        return None
    p, total = fit
    n = padded_length(total, limit)
    ids = np.full(n, pad_id, dtype=np.int64)
    labels = np.full(n, -100, dtype=np.int64)
    positions = np.empty(n, dtype=np.int64)
    segments = np.full(n, -1, dtype=np.int64)
    kinds_at = np.full(n, len(KINDS), dtype=np.int64)  # each position's own token's kind
    ids[:p], positions[:p], segments[:p] = np.asarray(examples[0]["input_ids"])[:p], np.arange(p), 0
    at = p
    for k, e in enumerate(examples):
        size = len(e["input_ids"]) - p
        span = slice(at, at + size)
        ids[span], labels[span] = np.asarray(e["input_ids"])[p:], np.asarray(e["labels"])[p:]
        labels[at] = -100  # its previous position is another segment's
        positions[span], segments[span] = np.arange(p, p + size), k + 1
        if token_kinds is not None:
            kinds_at[span] = np.asarray(token_kinds[k])[p:]
        at += size
    positions[total:] = np.arange(n - total)  # padding: positions of its own
    next_labels = np.r_[labels[1:], -100]
    kinds = np.where(next_labels != -100, np.r_[kinds_at[1:], len(KINDS)], len(KINDS))
    inputs = {
        "input_ids": torch.from_numpy(ids[None]),
        "labels": torch.from_numpy(labels[None]),
        "position_ids": torch.from_numpy(positions[None]),
        "attention_mask": row_mask(segments),
        "loss_rows": torch.from_numpy(np.flatnonzero(next_labels != -100).astype(np.int64)),
        **(row_blocks(segments) or {}),
    }
    return Batch(inputs, torch.from_numpy(kinds), total, n, torch.from_numpy(segments))


def _row_fit(examples: Sequence[dict[str, np.ndarray]], limit: int | None) -> tuple[int, int] | None:
    """(shared prefix, real tokens) of `examples` laid out as one row, or None when that
    row would be longer than `limit` tokens."""
    p = shared_prefix(examples)
    total = p + sum(len(e["input_ids"]) - p for e in examples)
    return None if limit is not None and total > limit else (p, total)


class Layout(NamedTuple):
    """The shape `micro_batch` gives a micro-batch: `tokens` real tokens (`Batch.tokens`)
    in `rows` rows of `width` positions (`Batch.processed` = rows * width), `prefix` of
    them computed once for every example (0 outside one row of several examples), and
    `pairs`, the (query, key) pairs one layer's attention computes over them
    (`dlm.train.row_blocks.attention_pairs` for one row, `rows * width ** 2` else)."""

    tokens: int
    rows: int
    width: int
    prefix: int
    pairs: int


def layout_of(examples: Sequence[dict[str, np.ndarray]], limit: int | None = None) -> Layout:
    """The layout `micro_batch` gives `examples`, without building the batch: a run's plan
    sizes every micro-batch before step 1 (`dlm.train.workload`)."""
    if not any("position_ids" in e for e in examples):
        fit = _row_fit(examples, limit)
        if fit is not None:
            p, total = fit
            width = padded_length(total, limit)
            tails = [len(e["input_ids"]) - p for e in examples]
            return Layout(total, 1, width, p, attention_pairs(p, tails, width))
    return rows_layout([len(e["input_ids"]) for e in examples], limit)


def rows_layout(sizes: Sequence[int], limit: int | None = None) -> Layout:
    """The layout of one example (or packed block) per row, `sizes` tokens each, padded to
    the longest (`dlm.train.data.collate`)."""
    width = padded_length(max(sizes), limit)
    return Layout(sum(sizes), len(sizes), width, 0, len(sizes) * width * width)


def micro_batch(
    examples: Sequence[dict[str, np.ndarray]],
    pad_id: int,
    limit: int | None = None,
    token_kinds: Sequence[np.ndarray] | None = None,
) -> Batch:
    """The layout the training loop gives `examples`: one row (`collate_row`) for windows
    that fit in `limit` tokens together, else `dlm.train.data.collate` (one example per
    row, or packed blocks)."""
    if not any("position_ids" in e for e in examples):
        row = collate_row(examples, pad_id, limit, token_kinds)
        if row is not None:
            return row
    return collate(examples, pad_id, limit, token_kinds)

"""Batches of examples as model inputs, with no attention across packed examples.

`collate` stacks a micro-batch of `dlm.train.dataset` examples into `[batch, n]` tensors,
`n` the longest example of the batch; shorter ones are right-padded with `pad_id`, their
labels with -100 (no loss).

- Packed blocks (examples with `position_ids`): the output has `input_ids`, `labels` and
  `position_ids`, and no `attention_mask`. transformers then derives the sequences from
  where `position_ids` restart (`masking_utils.find_packed_sequence_indices`) and masks
  attention block-diagonally, for sdpa and eager attention alike; a padded tail gets
  positions of its own that restart at 0, so it is a separate sequence nobody attends to.
  An `attention_mask` would switch that detection off, which is why none is sent.
- Windows (no `position_ids`): `input_ids`, `labels` and `attention_mask` (1 on real
  tokens), the usual padded batch.

`n` is rounded up to a multiple of `pad_to_multiple_of` (transformers' collators take the
same argument), at most `max_length`: a CPU's bfloat16 matmuls keep compiled kernels for
every shape they have seen (oneDNN's primitive cache, up to 1,024 of them, about 0.6 MB a
shape for a `[n, 576] x [576, 1536]` linear), and packed instruction blocks of every
length from 60 to 128 tokens kept adding shapes: the demo's live memory grew by 100 MB
over its 39 steps (`malloc_trim`'d RSS, 2-core Zen 4) and went on into the probe report.
`pad_multiple` bounds a run to about eight lengths; the padding is a tail nobody attends
to or scores.

Rows stay `[batch, n]` rather than one `[1, batch * n]` row (TRL's padding-free layout):
the attention mask is `batch * n^2` instead of `(batch * n)^2`, and dense sdpa on a CPU
computes every masked score, so one long row would do `batch` times the attention work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def pad_multiple(sequence_len: int) -> int:
    """The multiple a batch's length is rounded up to (module docstring): an eighth of
    `sequence_len` in whole 16s, at least 16 (`sequence_len` 128: 16; 2048: 256)."""
    return max(16, sequence_len // 8 // 16 * 16)


class PackedCollator:
    """A Trainer `data_collator` over `dlm.train.dataset` examples (module docstring).

    Args:
        pad_id: the id padding is written with (the tokenizer's pad token); it is never
            attended to or scored, so any id in the vocabulary works.
        pad_to_multiple_of: round each batch's length up to a multiple of this (1: the
            longest example's length).
        max_length: never round past this (the run's `sequence_len`); None: no bound.
    """

    def __init__(self, pad_id: int, pad_to_multiple_of: int = 1, max_length: int | None = None) -> None:
        if pad_to_multiple_of < 1:
            raise ValueError(f"pad_to_multiple_of must be at least 1, not {pad_to_multiple_of}")
        self.pad_id = pad_id
        self.pad_to_multiple_of = pad_to_multiple_of
        self.max_length = max_length

    def __call__(self, examples: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        """`examples`: dicts of 1-D int arrays (or lists). Returns int64 tensors `[batch, n]`: `input_ids`, `labels`, and `position_ids` or
        `attention_mask` (see module docstring).

        Raises:
            ValueError: an empty batch, or a batch mixing packed and unpacked examples.
        """
        if not examples:
            raise ValueError("cannot collate an empty batch")
        examples = [{k: np.asarray(v) for k, v in e.items()} for e in examples]  # lists from a plain Dataset
        packed = {"position_ids" in e for e in examples}
        if len(packed) != 1:
            raise ValueError("a batch mixes packed blocks and plain windows")
        longest = max(int(e["input_ids"].shape[0]) for e in examples)
        n = -(-longest // self.pad_to_multiple_of) * self.pad_to_multiple_of
        if self.max_length is not None:
            n = max(longest, min(n, self.max_length))
        batch = len(examples)
        ids = np.full((batch, n), self.pad_id, dtype=np.int64)
        labels = np.full((batch, n), -100, dtype=np.int64)
        for i, e in enumerate(examples):
            k = e["input_ids"].shape[0]
            ids[i, :k], labels[i, :k] = e["input_ids"], e["labels"]
        out = {"input_ids": torch.from_numpy(ids), "labels": torch.from_numpy(labels)}
        if packed.pop():
            positions = np.empty((batch, n), dtype=np.int64)
            for i, e in enumerate(examples):
                k = e["position_ids"].shape[0]
                positions[i, :k] = e["position_ids"]
                positions[i, k:] = np.arange(n - k)  # the padded tail restarts: a sequence of its own
            out["position_ids"] = torch.from_numpy(positions)
        else:
            mask = np.zeros((batch, n), dtype=np.int64)
            for i, e in enumerate(examples):
                mask[i, : e["input_ids"].shape[0]] = 1
            out["attention_mask"] = torch.from_numpy(mask)
        return out

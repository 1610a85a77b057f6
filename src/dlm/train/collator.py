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

Rows stay `[batch, n]` rather than one `[1, batch * n]` row (TRL's padding-free layout):
the attention mask is `batch * n^2` instead of `(batch * n)^2`, and dense sdpa on a CPU
computes every masked score, so one long row would do `batch` times the attention work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


class PackedCollator:
    """A Trainer `data_collator` over `dlm.train.dataset` examples (module docstring).

    Args:
        pad_id: the id padding is written with (the tokenizer's pad token); it is never
            attended to or scored, so any id in the vocabulary works.
    """

    def __init__(self, pad_id: int) -> None:
        self.pad_id = pad_id

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
        n = max(int(e["input_ids"].shape[0]) for e in examples)
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

"""Training examples cut from tokenized rows, read lazily.

Two layouts, both computed with NumPy over row lengths (no per-row Python loop):

- windows (default): a row of `L` tokens becomes windows of at most `sequence_len`
  tokens that overlap by one token (stride `sequence_len - 1`). A causal LM predicts
  every position of a window but the first from what precedes it, so the overlap makes
  every token of a row after its first a prediction target exactly once: a long file
  keeps its tail, and no token is lost at a window boundary;
- packing (`training.packing: true`): all rows are concatenated (each already ends
  with EOS) and cut into fixed `sequence_len` blocks; the last partial block is kept.

An example is `{"input_ids": 1-D int64 [n], "labels": 1-D int64 [n]}`: `labels` equals
`input_ids` except on an instruction row's prompt tokens, where it is -100 (no loss),
the convention of Hugging Face causal-LM models and TRL's collator.
Ids are widened from the stored uint16/uint32 to int64 here, one example at a time.
Examples with no predicted loss token (a window wholly inside a prompt) are dropped.

Instruction share (`training.instruction_share: f`): a document that teaches a few
Q/A pairs next to a large source tree would otherwise see them about once per epoch
among tens of thousands of windows. With a share set, every instruction example is
repeated `r` times, `r = max(1, round(f * n_other / ((1 - f) * n_instruction)))`, so
instruction examples make up about `f` of the examples drawn (of the tokens, with
packing). The repeats sit in the index arrays only; no ids are copied, and the order is
a pure function of the rows, so runs stay deterministic.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from dlm.tokenize.seam import TokenizedRows

MIN_LOSS_TOKENS = 1


class WindowDataset:
    """Map-style dataset of windows over rows (see module docstring).

    Attributes:
        row: 1-D int64 [n_examples], the row of each window.
        start, stop: 1-D int64 [n_examples], token bounds inside that row.
    """

    def __init__(self, rows: TokenizedRows, sequence_len: int, instruction_share: float | None = None) -> None:
        self.rows = rows
        lengths = rows.lengths.astype(np.int64)
        stride = max(sequence_len - 1, 1)
        counts = np.maximum(-(-(lengths - 1) // stride), 1)  # ceil((L - 1) / stride), at least 1
        self.row = np.repeat(np.arange(len(lengths), dtype=np.int64), counts)
        first = np.concatenate(([0], np.cumsum(counts)[:-1])) if len(counts) else np.zeros(0, np.int64)
        k = np.arange(self.row.shape[0], dtype=np.int64) - np.repeat(first, counts)
        self.start = k * stride
        self.stop = np.minimum(self.start + sequence_len, lengths[self.row])
        # positions start+1 .. stop-1 are predicted; those before n_prompt carry no loss
        loss_from = np.maximum(self.start + 1, rows.n_prompt.astype(np.int64)[self.row])
        keep = (self.stop - loss_from) >= MIN_LOSS_TOKENS
        self.row, self.start, self.stop = self.row[keep], self.start[keep], self.stop[keep]
        is_instruction = _instruction_rows(rows)[self.row]
        self.instruction_repeats = instruction_repeats(
            int(is_instruction.sum()), int((~is_instruction).sum()), instruction_share)
        if self.instruction_repeats > 1:
            take = np.repeat(np.arange(self.row.shape[0]), np.where(is_instruction, self.instruction_repeats, 1))
            self.row, self.start, self.stop = self.row[take], self.start[take], self.stop[take]
        self.n_prompt = rows.n_prompt.astype(np.int64)

    def __len__(self) -> int:
        return int(self.row.shape[0])

    @property
    def total_tokens(self) -> int:
        return int((self.stop - self.start).sum())

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        r, a, b = int(self.row[i]), int(self.start[i]), int(self.stop[i])
        ids = self.rows.read(r)[a:b].astype(np.int64)
        return _example(ids, np.arange(a, b) >= self.n_prompt[r])


class PackedDataset:
    """Map-style dataset of fixed-size blocks over the concatenation of all rows."""

    def __init__(self, rows: TokenizedRows, sequence_len: int, instruction_share: float | None = None) -> None:
        self.rows = rows
        self.sequence_len = sequence_len
        lengths = rows.lengths.astype(np.int64)
        is_instruction = _instruction_rows(rows)
        self.instruction_repeats = instruction_repeats(
            int(lengths[is_instruction].sum()), int(lengths[~is_instruction].sum()), instruction_share)
        #: order[j] is the row at position j of the concatenation (rows repeat under a share)
        self.order = np.repeat(np.arange(len(lengths), dtype=np.int64),
                               np.where(is_instruction, self.instruction_repeats, 1))
        self.offsets = np.concatenate(([0], np.cumsum(lengths[self.order])))
        total = int(self.offsets[-1])
        n_blocks = -(-total // sequence_len)
        # trailing block too short to train on is dropped
        if n_blocks and total - (n_blocks - 1) * sequence_len < MIN_LOSS_TOKENS + 1:
            n_blocks -= 1
        self.n_blocks = n_blocks
        self.total = total
        self.n_prompt = rows.n_prompt.astype(np.int64)[self.order]

    def __len__(self) -> int:
        return self.n_blocks

    @property
    def total_tokens(self) -> int:
        return min(self.total, self.n_blocks * self.sequence_len)

    def __getitem__(self, i: int) -> dict[str, np.ndarray]:
        a = i * self.sequence_len
        b = min(a + self.sequence_len, self.total)
        first = int(np.searchsorted(self.offsets, a, side="right")) - 1
        last = int(np.searchsorted(self.offsets, b, side="left")) - 1
        ids, mask = [], []
        for r in range(first, last + 1):
            lo = max(a, int(self.offsets[r])) - int(self.offsets[r])
            hi = min(b, int(self.offsets[r + 1])) - int(self.offsets[r])
            ids.append(self.rows.read(int(self.order[r]))[lo:hi])
            mask.append(np.arange(lo, hi) >= self.n_prompt[r])
        return _example(np.concatenate(ids).astype(np.int64), np.concatenate(mask))


def _example(ids: np.ndarray, loss_mask: np.ndarray) -> dict[str, np.ndarray]:
    labels = np.where(loss_mask, ids, -100)
    return {"input_ids": ids, "labels": labels}


def instruction_repeats(n_instruction: int, n_other: int, share: float | None) -> int:
    """How many times each instruction example is used so that instruction examples
    make up about `share` of all (see module docstring); 1 when `share` is None or one
    side is empty. Counts are examples (windows) or tokens (packing)."""
    if share is None or n_instruction == 0 or n_other == 0:
        return 1
    return max(1, round(share * n_other / ((1.0 - share) * n_instruction)))


def _instruction_rows(rows: TokenizedRows) -> np.ndarray:
    """1-D bool [n_rows]: True where the row is one Q/A pair of an instruction section."""
    return np.fromiter((kind == "instruction" for kind in rows.kinds), dtype=bool, count=len(rows.kinds))


def build_dataset(rows: TokenizedRows, sequence_len: int, packing: bool,
                  instruction_share: float | None = None) -> WindowDataset | PackedDataset:
    """Windows or packed blocks over `rows`, instruction examples repeated to make up
    about `instruction_share` of them when set (see module docstring)."""
    kind = PackedDataset if packing else WindowDataset
    return kind(rows, sequence_len, instruction_share)


def as_hf_dataset(examples: WindowDataset | PackedDataset, on_batch: Callable[[list[dict]], None] | None = None) -> object:
    """Wrap a lazy dataset as a Hugging Face `datasets.Dataset` (what TRL accepts).

    The Arrow table holds only `example_index` (int64 [n_examples]); ids are fetched
    and widened when the trainer reads a batch, through `with_transform`, so nothing
    is materialized up front. `on_batch`, when given, sees the examples of each fetch
    (one micro-batch per fetch when a data loader reads it).
    """
    from datasets import Dataset

    def fetch(batch: dict[str, list[int]]) -> dict[str, list[np.ndarray]]:
        got = [examples[int(i)] for i in batch["example_index"]]
        if on_batch is not None:
            on_batch(got)
        return {"input_ids": [g["input_ids"] for g in got], "labels": [g["labels"] for g in got]}

    table = Dataset.from_dict({"example_index": np.arange(len(examples), dtype=np.int64)})
    return table.with_transform(fetch)

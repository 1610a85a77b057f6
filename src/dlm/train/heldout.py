"""The held-out split: which tokenized rows train and which only measure.

Rule (versioned by `SPLIT_VERSION`):

    u(row) = xxh3_64("dlm-heldout-v1\\0" + row_key) / 2**64        # uniform in [0, 1)
    held out  <=>  u(row) < fraction  and  the document has >= MIN_ROWS_PER_KIND
                                           rows of that row's kind

- the unit is a whole row: a whole source file, a whole prose section, one Q/A pair,
  so no text is split between the two sides and nothing held out leaks into training;
- the row key (`dlm.tokenize.keys.row_key`) covers the row's text, which for a source
  file is its path and its content: a file stays on its side across runs and machines
  until it is edited, renamed or the base model's tokenizer changes;
- raising `fraction` only moves rows from training to held out, never back;
- a kind (prose, instruction, source) with fewer than `MIN_ROWS_PER_KIND` rows keeps all
  of them for training: taking one of a handful of pairs away costs the model more than
  the loss on one row tells the user. `fraction: 0` turns the split off;
- rows with the same key (duplicated files) share a side;
- only the document's own rows (`HELD_KINDS`: prose, instruction, source) are ever held
  out: a synth pair restates a fact whose other phrasings train, so holding it out
  measures nothing unseen, and a replay row is not the document.

`max_rows` caps only how many held-out rows are scored (those with the smallest `u`,
so the sample is stable too); every held-out row stays out of training.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import xxhash

from dlm.tokenize.seam import TokenizedRows

SPLIT_VERSION = 1
MIN_ROWS_PER_KIND = 20
HELD_KINDS = frozenset({"prose", "instruction", "source"})
_SALT = f"dlm-heldout-v{SPLIT_VERSION}\0".encode()


def split_value(key: str) -> float:
    """`u(row)` of the module docstring: a stable value in [0, 1) for one row key."""
    return xxhash.xxh3_64_intdigest(_SALT + key.encode("ascii")) / 2.0**64


@dataclass(frozen=True)
class Split:
    """Row indices (into the tokenized rows) on each side.

    Attributes:
        train: 1-D int64, rows that train, in their original order.
        heldout: 1-D int64, every held-out row, ordered by `u` (smallest first).
        scored: the first `max_rows` of `heldout`: the rows the held-out loss is measured on.
    """

    train: np.ndarray
    heldout: np.ndarray
    scored: np.ndarray

    @property
    def active(self) -> bool:
        return self.scored.shape[0] > 0


def split_rows(rows: TokenizedRows, fraction: float, max_rows: int) -> Split:
    """Apply the rule of the module docstring to `rows`.

    Args:
        fraction: share of rows to hold out, in [0, 1); 0 holds out nothing.
        max_rows: how many held-out rows are scored (>= 1).
    """
    n = len(rows)
    everything = np.arange(n, dtype=np.int64)
    none = np.zeros(0, dtype=np.int64)
    if fraction <= 0 or n == 0:
        return Split(everything, none, none)
    kinds = np.array(rows.kinds)
    u = np.array([split_value(k) for k in rows.keys])
    eligible = np.zeros(n, dtype=bool)
    for kind in set(rows.kinds) & HELD_KINDS:
        of_kind = kinds == kind
        if int(of_kind.sum()) >= MIN_ROWS_PER_KIND:
            eligible |= of_kind
    out = eligible & (u < fraction)
    heldout = everything[out]
    heldout = heldout[np.argsort(u[heldout], kind="stable")]
    return Split(everything[~out], heldout, heldout[:max_rows])


def subset(rows: TokenizedRows, indices: np.ndarray) -> TokenizedRows:
    """The rows at `indices` as their own `TokenizedRows` (ids read lazily from `rows`).

    Counters that describe the whole tokenize call (files taken and skipped, stats) are
    carried over unchanged.
    """
    if indices.shape[0] == len(rows) and bool((indices == np.arange(len(rows))).all()):
        return rows
    picked = [int(i) for i in indices]
    return TokenizedRows(
        lengths=rows.lengths[indices],
        n_prompt=rows.n_prompt[indices],
        keys=[rows.keys[i] for i in picked],
        read=lambda j: rows.read(picked[j]),
        kinds=[rows.kinds[i] for i in picked],
        files_taken=rows.files_taken,
        files_skipped=rows.files_skipped,
        lossy_files=rows.lossy_files,
        stats=rows.stats,
    )

"""The tokenize seam: the one place rows become token ids.

`dlm train` builds a `RowSet` (in-body `TextRow`s plus unread `FileRow`s from
`training.sources`) and hands it to a `RowEncoder`. Two implement it:
`dlm.tokenize.plain.PlainRowEncoder` (no cache) and the tokenized-section cache's
tokenizer. Both return `TokenizedRows`, which must agree token for token.

Token semantics (the same as TRL's SFTTrainer on the same rows):

- prose and source rows: `tokenizer(text + eos_token)["input_ids"]` (special tokens
  added by the tokenizer's post-processor, if any); `n_prompt = 0`.
- instruction rows: `text` is the whole conversation rendered with the chat template
  and `prompt_text` the conversation up to the answer with the generation prompt;
  both are encoded without extra special tokens, and `n_prompt` is the length of the
  common prefix of the two id lists (the prompt part, masked from the loss).

Ids are never truncated here: windows of `sequence_len` are cut afterwards.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from dlm.rows.types import RowKind, RowSet

if TYPE_CHECKING:
    import numpy as np


@dataclass
class TokenizeStats:
    """What one tokenize call did. Seconds are wall-clock."""

    total_rows: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    seconds: float = 0.0
    cache_bytes_after: int | None = None


@dataclass
class TokenizedRows:
    """Token ids of every usable row, readable lazily.

    Attributes:
        lengths: 1-D int64 [n_rows], tokens per row.
        n_prompt: 1-D int32 [n_rows], leading tokens of each row masked from the loss.
        keys: row keys in order (`dlm.tokenize.keys.row_key`), one per row.
        read: `read(i) -> 1-D uint16|uint32 [lengths[i]]`, the ids of row i.
        kinds: kind of each row, in order.
        files_taken: source files that became rows.
        files_skipped: reason -> count of source files skipped (binary, unreadable, ...).
        lossy_files: files whose undecodable bytes were replaced by U+FFFD.
        stats: hits, misses, seconds.
        warnings: what the tokenizer wants the user to know (a cache index moved
            aside, a remote tier that did not answer); the run goes on.
    """

    lengths: np.ndarray
    n_prompt: np.ndarray
    keys: list[str]
    read: Callable[[int], np.ndarray]
    kinds: list[RowKind]
    files_taken: int = 0
    files_skipped: Counter[str] = field(default_factory=Counter)
    lossy_files: int = 0
    stats: TokenizeStats = field(default_factory=TokenizeStats)
    warnings: tuple[str, ...] = ()

    def __len__(self) -> int:
        return int(self.lengths.shape[0])


class Progress(Protocol):
    """Progress sink: `advance(n)` after n rows are done. The CLI renders it with rich."""

    def start(self, description: str, total: int) -> None: ...

    def advance(self, n: int) -> None: ...


class NullProgress:
    """A `Progress` that shows nothing."""

    def start(self, description: str, total: int) -> None:
        pass

    def advance(self, n: int) -> None:
        pass


class RowEncoder(Protocol):
    """Turns a `RowSet` into `TokenizedRows` (see module docstring for the token rules)."""

    def tokenize(self, rows: RowSet, progress: Progress | None = None) -> TokenizedRows: ...

"""The uncached `RowEncoder`: reads every file and encodes every row, every run.

It is the reference the tokenized-section cache must match token for token, and the
path `dlm train` takes when `training.cache.enabled` is false.

Row order: text rows in order, then the file rows that were taken (a skipped file,
binary or unreadable, produces no row; its reason is counted in `files_skipped`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from dlm.rows.read import read_file_row, text_row_spec
from dlm.rows.types import RowKind, RowSet, RowSpec
from dlm.tokenize.encode import BATCH_ROWS, SpecEncoder
from dlm.tokenize.keys import row_key
from dlm.tokenize.seam import NullProgress, Progress, TokenizedRows, TokenizeStats


def spec_key(tokenizer_sha256: str, spec: RowSpec) -> str:
    """`row_key` of a spec."""
    return row_key(tokenizer_sha256, spec.kind, spec.text, spec.prompt_text)


def batched(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class PlainRowEncoder:
    """`RowEncoder` without a cache (see module docstring).

    Args:
        tokenizer: a Hugging Face fast tokenizer.
        tokenizer_sha256: the tokenizer's fingerprint (`dlm.tokenize.fingerprint`), used in row keys.
    """

    def __init__(self, tokenizer: Any, tokenizer_sha256: str) -> None:
        self.encoder = SpecEncoder(tokenizer)
        self.tokenizer_sha256 = tokenizer_sha256

    def tokenize(self, rows: RowSet, progress: Progress | None = None) -> TokenizedRows:
        """Encode every row of `rows`; ids are held in memory.

        Returns:
            `TokenizedRows` whose `read(i)` gives 1-D uint16|uint32 ids; stats count
            every row as a miss.

        Raises:
            TokenIdRangeError: an id does not fit uint32.
        """
        started = time.perf_counter()
        progress = progress or NullProgress()
        progress.start("tokenizing", len(rows.text_rows) + len(rows.file_rows))
        specs: list[RowSpec] = [text_row_spec(r) for r in rows.text_rows]
        skipped: Counter[str] = Counter()
        lossy = 0
        for frow in rows.file_rows:
            got = read_file_row(frow)
            if isinstance(got, str):
                skipped[got] += 1
                progress.advance(1)
                continue
            specs.append(got.spec)
            lossy += got.lossy
        ids: list[np.ndarray] = []
        n_prompt: list[int] = []
        for batch in batched(specs, BATCH_ROWS):
            for enc in self.encoder.encode(batch):
                ids.append(enc.ids)
                n_prompt.append(enc.n_prompt)
            progress.advance(len(batch))
        kinds: list[RowKind] = [s.kind for s in specs]
        return TokenizedRows(
            lengths=np.array([a.shape[0] for a in ids], dtype=np.int64),
            n_prompt=np.array(n_prompt, dtype=np.int32),
            keys=[spec_key(self.tokenizer_sha256, s) for s in specs],
            read=ids.__getitem__,
            kinds=kinds,
            files_taken=len(specs) - len(rows.text_rows),
            files_skipped=skipped,
            lossy_files=lossy,
            stats=TokenizeStats(
                total_rows=len(specs),
                cache_misses=len(specs),
                seconds=time.perf_counter() - started,
            ),
        )

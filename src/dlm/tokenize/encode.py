"""Batch encoding of rows into compact id arrays: the token rules of the seam.

The rules (`dlm.tokenize.seam` docstring) are the ones TRL's SFTTrainer applies:

- prose and source rows: `tokenizer(text + eos_token)` — the fast backend's
  `encode_batch(texts_with_eos, add_special_tokens=True)`, so the post-processor
  adds BOS/EOS where the tokenizer defines them, exactly as `tokenizer(text=...)`;
- instruction rows: `text` and `prompt_text` are encoded with
  `add_special_tokens=False` (what `apply_chat_template(tokenize=True)` does), and
  `n_prompt` is the length of the common prefix of the two id lists.

Encoding goes through the Rust backend's parallel `encode_batch_fast` (no offsets;
`dlm.tokenize.batch`), never one Python tokenizer call per row.

Storage dtype: uint16 when `len(tokenizer)` (added tokens included) is at most 65,536,
else uint32. The real maximum of every row is checked before casting: a row whose ids
do not fit uint16 is widened to uint32 (never NumPy's silent wraparound), and an id
that does not fit uint32 raises `TokenIdRangeError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol

import numpy as np

from dlm.errors import TrainingError
from dlm.rows.types import RowSpec
from dlm.tokenize.batch import compact_ids, encode_texts

BATCH_ROWS = 1000
"""Rows per encode batch: large enough to keep the backend's threads busy, small enough
that one batch's ids stay a few MiB."""
UINT16_LIMIT = 1 << 16
UINT32_LIMIT = 1 << 32


class TokenIdRangeError(TrainingError):
    """A token id does not fit the widest storage dtype (uint32)."""


class EncodingLike(Protocol):
    """One encoded text from the backend: `ids` is a list of ints."""

    @property
    def ids(self) -> list[int]: ...


class BackendLike(Protocol):
    """The part of a `tokenizers.Tokenizer` this module uses."""

    def encode_batch(self, inputs: list[str], add_special_tokens: bool = True) -> list[Any]: ...


@dataclass(frozen=True)
class EncodedRow:
    """One row's ids: `ids` is 1-D uint16|uint32 [n_tokens]; `n_prompt` masked tokens."""

    ids: np.ndarray
    n_prompt: int


def storage_dtype(tokenizer: Any) -> np.dtype:
    """uint16 when every id of the tokenizer fits (`len(tokenizer) <= 65536`), else uint32."""
    return np.dtype(np.uint16) if len(tokenizer) <= UINT16_LIMIT else np.dtype(np.uint32)


def ids_to_array(ids: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """Ids as a 1-D array of `dtype`, widened to uint32 when the real max needs it.

    Raises:
        TokenIdRangeError: an id is negative or >= 2**32.
    """
    try:
        wide = np.array(ids, dtype=np.int64)
    except OverflowError as exc:
        raise TokenIdRangeError(f"token id out of int64 range: {exc}") from None
    if wide.size == 0:
        return wide.astype(dtype)
    lo, hi = int(wide.min()), int(wide.max())
    if lo < 0 or hi >= UINT32_LIMIT:
        raise TokenIdRangeError(
            f"token id {hi if hi >= UINT32_LIMIT else lo} does not fit uint32; "
            "the tokenizer is not supported for compact storage"
        )
    if dtype == np.uint16 and hi >= UINT16_LIMIT:
        dtype = np.dtype(np.uint32)
    return wide.astype(dtype)


def common_prefix_len(a: np.ndarray, b: np.ndarray) -> int:
    """Number of leading equal elements of two 1-D arrays."""
    n = min(a.shape[0], b.shape[0])
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if diff.size else n


def backend_of(tokenizer: Any) -> BackendLike:
    """The Rust backend (`tokenizers.Tokenizer`) of a fast tokenizer, or the object itself."""
    return getattr(tokenizer, "backend_tokenizer", tokenizer)


class SpecEncoder:
    """Encodes batches of `RowSpec`s by the seam's rules.

    Args:
        tokenizer: a Hugging Face fast tokenizer (or any object with `eos_token`,
            `__len__` and a `backend_tokenizer` with `encode_batch`).
    """

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer

    # read on the first encode, not here: a run whose rows all hit never loads a
    # deferred tokenizer (`dlm.tokenize.deferred`)
    @cached_property
    def eos(self) -> str:
        return self.tokenizer.eos_token or ""

    @cached_property
    def dtype(self) -> np.dtype:
        return storage_dtype(self.tokenizer)

    @cached_property
    def backend(self) -> Any:
        return backend_of(self.tokenizer)

    def encode(self, specs: Sequence[RowSpec]) -> list[EncodedRow]:
        """Encode `specs` in order; text and instruction rows go in one batch each
        (`dlm.tokenize.batch.encode_texts`: the backend's fast batch encode).

        Returns one `EncodedRow` per spec, same order.

        Raises:
            TokenIdRangeError: an id does not fit uint32.
        """
        out: list[EncodedRow | None] = [None] * len(specs)
        plain = [i for i, s in enumerate(specs) if s.prompt_text is None]
        chat = [i for i, s in enumerate(specs) if s.prompt_text is not None]
        if plain:
            ids = encode_texts(self.backend, [specs[i].text + self.eos for i in plain], add_special_tokens=True)
            for i, row in zip(plain, ids, strict=False):
                out[i] = EncodedRow(self._compact(row), 0)
        if chat:
            texts = [specs[i].text for i in chat]
            prompts = [specs[i].prompt_text or "" for i in chat]
            ids = encode_texts(self.backend, texts + prompts, add_special_tokens=False)
            for j, i in enumerate(chat):
                full = self._compact(ids[j])
                prompt = np.array(ids[len(chat) + j], dtype=np.int64)
                out[i] = EncodedRow(full, common_prefix_len(full.astype(np.int64), prompt))
        return [row for row in out if row is not None]

    def _compact(self, ids: list[int]) -> np.ndarray:
        try:
            return compact_ids(ids, self.dtype)
        except OverflowError:
            return ids_to_array(ids, self.dtype)  # raises TokenIdRangeError naming the id

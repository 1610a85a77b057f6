"""The L1 level of the tokenizer cache: prompt prefixes that end where an added token starts.

A prefix of a prompt's UTF-8 bytes up to the start of an added token (`<|im_start|>`,
`[SEP]`, ...) is encoded without special tokens, keyed by (tokenizer_sha256, xxh3-128 of
the prefix) and stored in an `LruStore`; `plan.py` proves, per tokenizer, why ids of
such a cut joined to the ids of the rest equal the ids of the whole. `lookup` finds
boundaries from the end of the prompt, hashes their prefixes deepest first until one
is cached, and encodes only the rest (less the short closing pieces `pieces.py`
knows); on a hit it queues the deepest new boundary, on a miss every boundary (at
most `MAX_BOUNDARIES`), for the caller to `commit` (or not, for a prompt it refuses).
Thread-safe as the store is; the piece cache is best-effort.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import xxhash

from dlm.serve.tokcache.pieces import PieceCache
from dlm.serve.tokcache.plan import SplitPlan
from dlm.serve.tokcache.store import LruStore

L1_KEY_BYTES = sys.getsizeof(("", 0)) + sys.getsizeof(1 << 127)

MAX_BOUNDARIES = 64
"""Split points considered per prompt (the first and last halves when there are more):
bounds the work and memory a prompt full of special tokens can cause."""

Put = tuple[Any, array]
"""An L1 entry to store: (key, ids)."""


class Encoding(Protocol):
    """What the Rust tokenizer's `Encoding` gives here."""

    ids: list[int]

    def char_to_token(self, char_pos: int) -> int | None: ...


class Backend(Protocol):
    """The Rust `tokenizers.Tokenizer` behind a fast tokenizer (`backend_tokenizer`)."""

    truncation: Any
    padding: Any
    encode_special_tokens: bool

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding: ...

    def encode_batch_fast(self, texts: list[str], add_special_tokens: bool = True) -> list[Encoding]: ...

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]: ...

    def to_str(self) -> str: ...


def backend_ids(backend: Backend, text: str, add_special: bool) -> list[int]:
    """The backend's ids of `text`, without character offsets: `encode_batch_fast`
    on a batch of one gives the same ids as `encode` and skips building offsets, a
    sizeable share of the cost of a short piece (docs/benchmarks.md, "Tokenizer cache:
    arrays or tuples")."""
    return backend.encode_batch_fast([text], add_special_tokens=add_special)[0].ids


class PrefixLevel:
    """L1 over one tokenizer (see module docstring).

    Args:
        store: the level's bounded store. plan: the tokenizer's split plan.
        backend: the Rust tokenizer. tokenizer_sha256 / seed: part of every key.
        typecode: "H" or "I", the array type of stored ids.
    """

    def __init__(
        self, store: LruStore, plan: SplitPlan, backend: Backend, tokenizer_sha256: str, seed: int, typecode: str
    ):
        self.store = store
        self.plan = plan
        self.backend = backend
        self.tokenizer_sha256 = tokenizer_sha256
        self.seed = seed
        self.typecode = typecode
        self.pieces = PieceCache()

    def pack(self, ids: Iterable[int]) -> array:
        return array(self.typecode, ids)

    def ids_of(self, text: str, add_special: bool) -> list[int]:
        return backend_ids(self.backend, text, add_special)

    def commit(self, pending: list[Put]) -> None:
        """Store the entries `lookup` / `warm` queued."""
        for key, ids in pending:
            self.store.put(key, ids, L1_KEY_BYTES)

    def warm(self, data: bytes) -> int:
        """Store every boundary prefix of the UTF-8 text `data`; how many were stored."""
        plan = self.plan
        if plan.bypass_re is not None and plan.bypass_re.search(data):
            return 0
        starts = self.boundaries(data)
        pending: list[Put] = []
        self.encode_storing_all(data, starts, self.prefix_keys(data, starts), pending)
        self.commit(pending)
        return len(pending)

    def clear(self) -> None:
        self.store.clear()
        self.pieces.clear()

    def lookup(self, data: bytes, pending: list[Put]) -> tuple[array, list[int], list[int], int] | None:
        """Ids without special tokens of the UTF-8 text `data` via the prefix cache, as
        (prefix ids, ids of the rest, all ids as a fresh list, how many came from the
        cache), or None to
        encode plainly. The entries to store are appended to `pending` (the caller
        stores them, or not when the prompt is refused)."""
        plan = self.plan
        if plan.bypass_re is not None and plan.bypass_re.search(data):
            return None
        l1 = self.store
        seen: list[int] = []
        keys: list[tuple[str, int]] = []
        found_at, prefix = l1.deepest(self._probe_keys(data, self.probe_starts(data), seen, keys))
        if not seen:  # no boundary
            return None
        if prefix is None:
            forward = self.boundaries(data)
            packed = self.encode_storing_all(data, forward, self.prefix_keys(data, forward), pending)
            return packed, [], packed.tolist(), 0
        ids = prefix.tolist()
        deepest = seen[0]
        if found_at == 0:
            rest = self.encode_piece(data[deepest:])
            ids += rest
            return prefix.ids, rest, ids, len(prefix.ids)
        # One encode of the rest, less the known short pieces it ends with (the chat
        # template's closing turn); boundaries split the ids exactly, so the deepest
        # one gives the new prefix, stored for the next turn.
        begin = seen[found_at]
        end, tail, last = self.pieces.peel(data, seen[:found_at])
        if end > deepest:  # the final piece is encoded: split there (offsets needed), learn the tail
            encoding = self.backend.encode(data[begin:end].decode("utf-8"), add_special_tokens=False)
            rest = encoding.ids
            cut = encoding.char_to_token(len(data[begin:deepest].decode("utf-8")))
            self.pieces.learn(data, begin, encoding, rest, seen[:found_at])
        else:
            rest = self.ids_of(data[begin:end].decode("utf-8"), False)
            cut = len(rest) + len(tail) - last
        rest += tail
        n_prefix = len(ids)
        ids += rest
        if cut is not None:  # None is not expected: then do not store, the result is still exact
            pending.append((keys[0], prefix.ids + self.pack(rest[:cut])))
        return prefix.ids, rest, ids, n_prefix

    def encode_storing_all(self, data: bytes, starts: list[int], keys: list[Any], pending: list[Put]) -> array:
        """Ids (no special tokens) of `data`, queuing each boundary's prefix in `pending`
        while it fits one entry's share of L1; past that, the rest in one encode (the
        boundaries split the ids exactly, so one encode equals the pieces joined)."""
        l1 = self.store
        packed = self.pack(())
        begin = 0
        for end, key in zip(starts, keys, strict=True):
            packed = packed + self.pack(self.encode_piece(data[begin:end]))
            if not l1.fits(packed, L1_KEY_BYTES):
                rest = data[end:].decode("utf-8")
                return packed + self.pack(self.ids_of(rest, False))
            pending.append((key, packed))
            begin = end
        return packed + self.pack(self.encode_piece(data[begin:]))

    def boundaries(self, data: bytes) -> list[int]:
        """Byte offsets (> 0) where a stage-1 added-token match starts (see plan.py)."""
        starts = self.plan.match_starts(data)
        if starts and starts[0] == 0:
            starts.pop(0)
        if len(starts) > MAX_BOUNDARIES:
            half = MAX_BOUNDARIES // 2
            starts = starts[:half] + starts[-half:]
        return starts

    def probe_starts(self, data: bytes) -> Iterator[int]:
        """The boundaries of `_boundaries(data)`, deepest first, found lazily: with a
        `match_lead`, the last half by scanning back from the end (a hit is usually
        among the deepest few, even in a prompt with hundreds of boundaries), and the
        first half only if needed."""
        lowest = len(data) + 1
        if self.plan.match_lead:
            found = 0
            for start in self.plan.match_starts_reversed(data):
                if start == 0:
                    return
                if found == MAX_BOUNDARIES // 2:
                    break
                yield start
                found += 1
                lowest = start
            else:
                return
        for start in reversed(self.boundaries(data)):
            if start < lowest:
                yield start

    def _probe_keys(
        self, data: bytes, starts: Iterator[int], seen: list[int], keys: list[tuple[str, int]]
    ) -> Iterator[tuple[str, int]]:
        """(tokenizer_sha256, xxh3-128 of data[:b]) for each b of `starts`, hashed only when
        probed; each b and key is appended to `seen` and `keys`."""
        view = memoryview(data)
        tokenizer_sha256, seed = self.tokenizer_sha256, self.seed
        for start in starts:
            key = (tokenizer_sha256, xxhash.xxh3_128_intdigest(view[:start], seed=seed))
            seen.append(start)
            keys.append(key)
            yield key

    def prefix_keys(self, data: bytes, starts: list[int]) -> list[tuple[str, int]]:
        """(tokenizer_sha256, xxh3-128 of data[:b]) for each b, in one streaming pass."""
        hasher = xxhash.xxh3_128(seed=self.seed)
        view = memoryview(data)
        keys = []
        begin = 0
        tokenizer_sha256 = self.tokenizer_sha256
        for end in starts:
            hasher.update(view[begin:end])
            keys.append((tokenizer_sha256, hasher.intdigest()))
            begin = end
        return keys

    def encode_piece(self, piece: bytes) -> list[int]:
        """Ids of text between boundaries (no special tokens added), known ones from the
        piece cache."""
        if not piece:
            return []
        known = self.pieces.get(piece)
        if known is not None:
            return list(known)
        ids = self.ids_of(piece.decode("utf-8"), False)
        self.pieces.put(piece, ids)
        return ids

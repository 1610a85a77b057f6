"""In-memory LRU stores for the two cache levels, safe under concurrent requests.

Entries hold token ids as `array.array` of the tokenizer's id width: typecode "H"
(uint16, 2 bytes per id) when every id fits, else "I" (uint32, 4 bytes). Building
the array raises `OverflowError` on an id that does not fit, so ids never wrap.

A hit gives the caller a fresh `list[int]` through `array.tolist()`, which makes one
int object per id. Keeping the ids of entries hit often as a tuple of ints as well, so
that a hit copies pointers instead, saves a little of the cache's own time per request
but holds 9 times an array's bytes per id, and a `dlm serve` request's latency is
dominated by prefill, so it made no difference through the real server
(docs/benchmarks.md, "Tokenizer cache: arrays or tuples"). So the stores keep arrays only.

Bytes are counted honestly per entry: `sys.getsizeof` of the id array (header and
buffer) plus its key. Dictionary slot overhead (about 100 bytes per entry) is not
included.

Every method takes the store's lock; callers never hold it while encoding.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple


def id_typecode(vocab_size: int) -> str:
    """ "H" (uint16) when ids are < 65,536, else "I" (uint32). Raises if "I" is not 4 bytes."""
    if vocab_size <= 1 << 16:
        return "H"
    if array("I").itemsize != 4:
        raise RuntimeError("array typecode 'I' is not 4 bytes on this platform")
    return "I"


class Hit(NamedTuple):
    """A found entry.

    Attributes:
        ids: 1-D array [n_ids] of typecode "H" (uint16) or "I" (uint32); never mutate.
    """

    ids: array

    def tolist(self) -> list[int]:
        """A fresh `list[int]` [n_ids] of the ids."""
        return self.ids.tolist()


@dataclass(frozen=True)
class LevelStats:
    """Counters of one level. `hit_rate` is hits / (hits + misses), 0.0 before any lookup;
    `bytes` counts ids and keys (module docstring), `ids` the ids held."""

    hits: int
    misses: int
    entries: int
    bytes: int
    ids: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class LruStore:
    """A thread-safe LRU map key -> id array, bounded by entries and/or bytes.

    Args:
        typecode: "H" or "I" (see `id_typecode`).
        max_entries: evict beyond this many entries (None: no entry bound).
        max_bytes: evict beyond this many counted bytes (None: no byte bound).
        max_entry_bytes: an entry counting more bytes than this (or than `max_bytes`)
            is not stored (None: only `max_bytes` limits an entry).
    """

    def __init__(
        self,
        typecode: str,
        *,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        max_entry_bytes: int | None = None,
    ):
        self._typecode = typecode
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        limits = [b for b in (max_bytes, max_entry_bytes) if b is not None]
        self._max_entry_bytes = min(limits) if limits else None
        self._data: OrderedDict[Hashable, tuple[array, int]] = OrderedDict()  # key -> (ids, counted bytes)
        self._lock = threading.Lock()
        self._bytes = 0
        self._ids = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> Hit | None:
        """The entry under `key` (marked most recently used), counting a hit or a miss."""
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                self.misses += 1
                return None
            return self._found(key, entry)

    def deepest(self, probes: Iterable[Hashable]) -> tuple[int, Hit | None]:
        """Try `probes` in order; return (position, entry) of the first key found, or (-1, None).

        One lookup: counts one hit or one miss whatever the number of probes (nothing
        when `probes` is empty). `probes` may be a lazy iterator (it is consumed under
        the lock, only as far as needed).
        """
        with self._lock:
            index = -1
            for index, key in enumerate(probes):
                entry = self._data.get(key)
                if entry is not None:
                    return index, self._found(key, entry)
            if index >= 0:
                self.misses += 1
            return -1, None

    def put(self, key: Hashable, ids: Sequence[int] | array, key_bytes: int = 0) -> None:
        """Store `ids` (copied into a compact array) under `key`, evicting LRU entries.

        An entry over the per-entry bound is not stored (see `max_entry_bytes`).
        """
        packed = ids if isinstance(ids, array) and ids.typecode == self._typecode else array(self._typecode, ids)
        self.put_many([(key, packed)], key_bytes)

    def put_many(self, entries: Iterable[tuple[Hashable, array]], key_bytes: int = 0) -> None:
        """`put` each (key, ids) of `entries` in order, under one acquisition of the lock."""
        typecode = self._typecode
        sized = []
        for key, ids in entries:
            packed = ids if ids.typecode == typecode else array(typecode, ids)
            size = sys.getsizeof(packed) + key_bytes
            if self._max_entry_bytes is None or size <= self._max_entry_bytes:
                sized.append((key, packed, size))
        if not sized:
            return
        with self._lock:
            data = self._data
            for key, packed, size in sized:
                old = data.pop(key, None)
                if old is not None:
                    self._forget(old)
                data[key] = (packed, size)
                self._bytes += size
                self._ids += len(packed)
            self._evict()

    def fits(self, ids: array, key_bytes: int = 0) -> bool:
        """Whether `put(key, ids, key_bytes)` would store the entry (its size is within
        the per-entry bound)."""
        limit = self._max_entry_bytes
        return limit is None or sys.getsizeof(ids) + key_bytes <= limit

    def _found(self, key: Hashable, entry: tuple[array, int]) -> Hit:
        self._data.move_to_end(key)
        self.hits += 1
        return Hit(entry[0])

    def _forget(self, entry: tuple[array, int]) -> None:
        self._bytes -= entry[1]
        self._ids -= len(entry[0])

    def _evict(self) -> None:
        while self._data and (
            (self._max_entries is not None and len(self._data) > self._max_entries)
            or (self._max_bytes is not None and self._bytes > self._max_bytes)
        ):
            self._forget(self._data.popitem(last=False)[1])

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._data.clear()
            self._bytes = self._ids = self.hits = self.misses = 0

    def stats(self) -> LevelStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return LevelStats(self.hits, self.misses, len(self._data), self._bytes, self._ids)

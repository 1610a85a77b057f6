"""In-memory LRU stores for the two cache levels, safe under concurrent requests.

Entries hold token ids as `array.array` of the tokenizer's id width: typecode "H"
(uint16, 2 bytes per id) when every id fits, else "I" (uint32, 4 bytes). Building
the array raises `OverflowError` on an id that does not fit, so ids never wrap.

Hot tier: callers need a `list[int]`, and `array.tolist()` builds one int object per
id (~20 ns each: ~40 µs for a 2,000-token prefix), while `list(tuple)` only copies
pointers (~3 µs). So a store keeps the ids of entries found a second time as a
tuple of ints too (a system prompt shared by every request, a canned question), and
a caller may store an entry hot at once when it already holds the ints and expects
the entry to be found (the next turn of a conversation, see cached.py). A hot entry
costs 8 bytes per id for the tuple plus one int object per id (28 or 32 bytes),
about 9x its array, so hot tuples share a byte budget (`max_hot_bytes`, inside
`max_bytes` when there is one); past it, the least recently used hot entries drop
their tuples and keep their arrays.

Bytes are counted honestly per entry: `sys.getsizeof` of the id array (header and
buffer), of the hot tuple and its int objects (an upper bound: small ints shared by
the interpreter are counted too), plus its key. Dictionary slot overhead (about 100
bytes per entry) is not included.

Every method takes the store's lock; callers never hold it while encoding.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

HOT_AFTER_HITS = 2
"""An entry is made hot on this many hits."""

_IDS, _SIZE, _HITS, _HOT, _GROWN = range(5)  # fields of an entry (a list, mutated in place)


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
        hot: the same ids as a tuple of ints while the entry is hot, else None.
        grown: the caller's flag given to `put` (L1: stored while answering a request
            that extended an earlier prompt).
    """

    ids: array
    hot: tuple[int, ...] | None
    grown: bool = False

    def tolist(self) -> list[int]:
        """A fresh `list[int]` [n_ids] of the ids (cheap when hot)."""
        return list(self.hot) if self.hot is not None else self.ids.tolist()


@dataclass(frozen=True)
class LevelStats:
    """Counters of one level. `hit_rate` is hits / (hits + misses), 0.0 before any lookup;
    `bytes` includes the `hot_bytes` of the `hot_entries`."""

    hits: int
    misses: int
    entries: int
    bytes: int
    ids: int
    hot_entries: int = 0
    hot_bytes: int = 0

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
        max_hot_bytes: bytes of hot tuples kept at most (0: no hot tier).
        max_entry_bytes: an entry counting more bytes than this (or than `max_bytes`)
            is not stored (None: only `max_bytes` limits an entry).
    """

    def __init__(
        self,
        typecode: str,
        *,
        max_entries: int | None = None,
        max_bytes: int | None = None,
        max_hot_bytes: int = 0,
        max_entry_bytes: int | None = None,
    ):
        self._typecode = typecode
        self._int_bytes = sys.getsizeof((1 << 16) - 1 if typecode == "H" else (1 << 32) - 1)
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._max_hot_bytes = max_hot_bytes
        limits = [b for b in (max_bytes, max_entry_bytes) if b is not None]
        self._max_entry_bytes = min(limits) if limits else None
        self._data: OrderedDict[Hashable, list[Any]] = OrderedDict()
        self._hot: OrderedDict[Hashable, list[Any]] = OrderedDict()  # LRU order of hot entries
        self._lock = threading.Lock()
        self._bytes = 0
        self._hot_bytes = 0
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

    def put(
        self,
        key: Hashable,
        ids: Sequence[int] | array,
        key_bytes: int = 0,
        *,
        grown: bool = False,
        hot: tuple[int, ...] | None = None,
    ) -> None:
        """Store `ids` (copied into a compact array) under `key`, evicting LRU entries.

        An entry over the per-entry bound is not stored (see `max_entry_bytes`).
        `grown` is returned with the entry (`Hit.grown`). `hot`: the same ids as a
        tuple of ints the caller already holds, kept while the hot budget allows (the
        caller guarantees it equals `ids`).
        """
        packed = ids if isinstance(ids, array) and ids.typecode == self._typecode else array(self._typecode, ids)
        size = sys.getsizeof(packed) + key_bytes
        if self._max_entry_bytes is not None and size > self._max_entry_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._forget(key, old)
            entry = [packed, size, 0, None, grown]
            self._data[key] = entry
            self._bytes += size
            self._ids += len(packed)
            if hot is not None:
                self._make_hot(key, entry, hot)
            self._evict()

    def fits(self, ids: array, key_bytes: int = 0) -> bool:
        """Whether `put(key, ids, key_bytes)` would store the entry (its size is within
        the per-entry bound)."""
        limit = self._max_entry_bytes
        return limit is None or sys.getsizeof(ids) + key_bytes <= limit

    def drop_hot(self, key: Hashable) -> None:
        """Drop the tuple of `key`'s entry, if any; the entry keeps its array."""
        with self._lock:
            entry = self._hot.pop(key, None)
            if entry is not None:
                self._demote(entry)

    def _found(self, key: Hashable, entry: list[Any]) -> Hit:
        self._data.move_to_end(key)
        self.hits += 1
        entry[_HITS] += 1
        if entry[_HOT] is not None:
            self._hot.move_to_end(key)
        elif entry[_HITS] >= HOT_AFTER_HITS and self._max_hot_bytes:
            self._make_hot(key, entry, tuple(entry[_IDS].tolist()))
            self._evict()
        return Hit(entry[_IDS], entry[_HOT], entry[_GROWN])

    def _hot_size(self, n_ids: int) -> int:
        return sys.getsizeof(()) + n_ids * (8 + self._int_bytes)

    def _make_hot(self, key: Hashable, entry: list[Any], hot: tuple[int, ...]) -> None:
        extra = self._hot_size(len(hot))
        if extra > self._max_hot_bytes or (self._max_bytes is not None and entry[_SIZE] + extra > self._max_bytes):
            return
        entry[_HOT] = hot
        entry[_SIZE] += extra
        self._bytes += extra
        self._hot_bytes += extra
        self._hot[key] = entry
        while self._hot_bytes > self._max_hot_bytes:  # never this entry: it is the newest
            self._demote(self._hot.popitem(last=False)[1])

    def _demote(self, entry: list[Any]) -> None:
        """Drop an entry's tuple (it keeps its array); the caller removed it from `_hot`."""
        extra = self._hot_size(len(entry[_IDS]))
        entry[_HOT] = None
        entry[_SIZE] -= extra
        self._bytes -= extra
        self._hot_bytes -= extra

    def _forget(self, key: Hashable, entry: list[Any]) -> None:
        if entry[_HOT] is not None:
            del self._hot[key]
            self._demote(entry)
        self._bytes -= entry[_SIZE]
        self._ids -= len(entry[_IDS])

    def _evict(self) -> None:
        while self._data and (
            (self._max_entries is not None and len(self._data) > self._max_entries)
            or (self._max_bytes is not None and self._bytes > self._max_bytes)
        ):
            self._forget(*self._data.popitem(last=False))

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._data.clear()
            self._hot.clear()
            self._bytes = self._hot_bytes = self._ids = self.hits = self.misses = 0

    def stats(self) -> LevelStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return LevelStats(
                self.hits, self.misses, len(self._data), self._bytes, self._ids, len(self._hot), self._hot_bytes
            )

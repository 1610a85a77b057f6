"""In-memory LRU stores for the two cache levels, safe under concurrent requests.

Entries hold token ids as `array.array` of the tokenizer's id width: typecode "H"
(uint16, 2 bytes per id) when every id fits, else "I" (uint32, 4 bytes). Building
the array raises `OverflowError` on an id that does not fit, so ids never wrap.

An entry found a second time also keeps its ids as a tuple of Python ints ("hot"):
a caller needs a `list[int]`, and `list(tuple)` only copies pointers, while
`array.tolist()` builds one int object per id (for a 2,000-id system prompt, ~3 µs
against ~27 µs). A hot entry costs 8 bytes per id for the tuple plus one int object
per id (28 or 32 bytes), so only entries that repeat are promoted, and only while
the entry still fits the byte bound.

Bytes are counted honestly per entry: `sys.getsizeof` of the id array (header and
buffer), of the hot tuple and its int objects (an upper bound: small ints shared by
the interpreter are counted too), plus its key (the prompt string for L0, the key
tuple for L1). Dictionary slot overhead (about 100 bytes per entry) is not included.

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
"""An entry is promoted to hot on this many hits (a prefix hit once, e.g. one turn of a
growing conversation, is not worth the memory)."""


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
        hot: the same ids as a tuple of ints once the entry is hot, else None.
    """

    ids: array
    hot: tuple[int, ...] | None

    def tolist(self) -> list[int]:
        """A fresh `list[int]` [n_ids] of the ids (cheap when hot)."""
        return list(self.hot) if self.hot is not None else self.ids.tolist()


@dataclass(frozen=True)
class LevelStats:
    """Counters of one level. `hit_rate` is hits / (hits + misses), 0.0 before any lookup."""

    hits: int
    misses: int
    entries: int
    bytes: int
    ids: int
    hot_entries: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class LruStore:
    """A thread-safe LRU map key -> id array, bounded by entries and/or bytes.

    Args:
        typecode: "H" or "I" (see `id_typecode`).
        max_entries: evict beyond this many entries (None: no entry bound).
        max_bytes: evict beyond this many counted bytes (None: no byte bound). An
            entry larger than `max_bytes` on its own is not stored.
    """

    def __init__(self, typecode: str, *, max_entries: int | None = None, max_bytes: int | None = None):
        self._typecode = typecode
        self._int_bytes = sys.getsizeof((1 << 16) - 1 if typecode == "H" else (1 << 32) - 1)
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        # key -> [ids, counted bytes, hits, hot tuple or None]
        self._data: OrderedDict[Hashable, list[Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0
        self._ids = 0
        self._hot = 0
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

        One lookup: counts one hit or one miss whatever the number of probes. `probes`
        may be a lazy iterator (it is consumed under the lock, only as far as needed).
        """
        with self._lock:
            for index, key in enumerate(probes):
                entry = self._data.get(key)
                if entry is not None:
                    return index, self._found(key, entry)
            self.misses += 1
            return -1, None

    def _found(self, key: Hashable, entry: list[Any]) -> Hit:
        self._data.move_to_end(key)
        self.hits += 1
        entry[2] += 1
        if entry[3] is None and entry[2] >= HOT_AFTER_HITS:
            self._promote(entry)
        return Hit(entry[0], entry[3])

    def _promote(self, entry: list[Any]) -> None:
        """Keep a tuple of the entry's ids too, if the entry still fits the byte bound."""
        ids = entry[0]
        extra = sys.getsizeof(()) + len(ids) * (8 + self._int_bytes)
        if self._max_bytes is not None and entry[1] + extra > self._max_bytes:
            return
        entry[3] = tuple(ids.tolist())
        entry[1] += extra
        self._bytes += extra
        self._hot += 1
        self._evict()  # the entry itself is most recently used, so it goes last

    def put(self, key: Hashable, ids: Sequence[int] | array, key_bytes: int = 0) -> None:
        """Store `ids` (copied into a compact array) under `key`, evicting LRU entries."""
        packed = (
            ids if isinstance(ids, array) and ids.typecode == self._typecode else array(self._typecode, ids)
        )
        size = sys.getsizeof(packed) + key_bytes
        if self._max_bytes is not None and size > self._max_bytes:
            return
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self._forget(old)
            self._data[key] = [packed, size, 0, None]
            self._bytes += size
            self._ids += len(packed)
            self._evict()

    def _forget(self, entry: list[Any]) -> None:
        self._bytes -= entry[1]
        self._ids -= len(entry[0])
        self._hot -= entry[3] is not None

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
            self._bytes = self._ids = self._hot = self.hits = self.misses = 0

    def stats(self) -> LevelStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return LevelStats(self.hits, self.misses, len(self._data), self._bytes, self._ids, self._hot)

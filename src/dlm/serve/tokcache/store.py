"""In-memory LRU stores for the two cache levels, safe under concurrent requests.

Entries hold token ids as `array.array` of the tokenizer's id width: typecode "H"
(uint16, 2 bytes per id) when every id fits, else "I" (uint32, 4 bytes). Building
the array raises `OverflowError` on an id that does not fit, so ids never wrap.

Bytes are counted honestly per entry: `sys.getsizeof` of the id array (header and
buffer) plus its key (the prompt string for L0, the key tuple for L1). Dictionary
slot overhead (about 100 bytes per entry) is not included.

Every method takes the store's lock; callers never hold it while encoding.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass


def id_typecode(vocab_size: int) -> str:
    """ "H" (uint16) when ids are < 65,536, else "I" (uint32). Raises if "I" is not 4 bytes."""
    if vocab_size <= 1 << 16:
        return "H"
    if array("I").itemsize != 4:
        raise RuntimeError("array typecode 'I' is not 4 bytes on this platform")
    return "I"


@dataclass(frozen=True)
class LevelStats:
    """Counters of one level. `hit_rate` is hits / (hits + misses), 0.0 before any lookup."""

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
        max_bytes: evict beyond this many counted bytes (None: no byte bound). An
            entry larger than `max_bytes` on its own is not stored.
    """

    def __init__(self, typecode: str, *, max_entries: int | None = None, max_bytes: int | None = None):
        self._typecode = typecode
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._data: OrderedDict[Hashable, tuple[array, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._bytes = 0
        self._ids = 0
        self.hits = 0
        self.misses = 0

    def get(self, key: Hashable) -> array | None:
        """The ids under `key` (marked most recently used), counting a hit or a miss."""
        with self._lock:
            found = self._data.get(key)
            if found is None:
                self.misses += 1
                return None
            self._data.move_to_end(key)
            self.hits += 1
            return found[0]

    def deepest(self, probes: Iterable[Hashable]) -> tuple[int, array | None]:
        """Try `probes` in order; return (position, ids) of the first key found, or (-1, None).

        One lookup: counts one hit or one miss whatever the number of probes. `probes`
        may be a lazy iterator (it is consumed under the lock, only as far as needed).
        """
        with self._lock:
            for index, key in enumerate(probes):
                found = self._data.get(key)
                if found is not None:
                    self._data.move_to_end(key)
                    self.hits += 1
                    return index, found[0]
            self.misses += 1
            return -1, None

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
                self._bytes -= old[1]
                self._ids -= len(old[0])
            self._data[key] = (packed, size)
            self._bytes += size
            self._ids += len(packed)
            self._evict()

    def _evict(self) -> None:
        while self._data and (
            (self._max_entries is not None and len(self._data) > self._max_entries)
            or (self._max_bytes is not None and self._bytes > self._max_bytes)
        ):
            _, (packed, size) = self._data.popitem(last=False)
            self._bytes -= size
            self._ids -= len(packed)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._data.clear()
            self._bytes = self._ids = self.hits = self.misses = 0

    def stats(self) -> LevelStats:
        """A consistent snapshot of the counters."""
        with self._lock:
            return LevelStats(self.hits, self.misses, len(self._data), self._bytes, self._ids)

"""Letting a mapped weight file's pages go as each weight is copied out of it.

transformers loads safetensors weights as views of the mapped file, and every page read
counts as resident until the whole mapping is unmapped, which happens only when the last
tensor viewing it is freed. A bfloat16 run copies the frozen weights out one by one
(`dlm.train.precision.hold_frozen_weights`), so without help its memory peaks at the
end of that loop, with all 0.52 GB of SmolLM2's float32 pages and all 0.27 GB of their
bfloat16 copies resident at once.

`FileMappings.drop` hands back the pages under one tensor as soon as it is copied
(`madvise(MADV_DONTNEED)`), but only inside a file-backed mapping in which no page was
ever written (`/proc/self/smaps` reports `Anonymous: 0 kB`): there, dropping loses
nothing, and a later read of the same bytes faults the file's own contents back in.
Only whole pages inside the tensor are dropped, so a neighbour sharing its first or last
page keeps it. Linux only; elsewhere nothing is dropped.
"""

from __future__ import annotations

import bisect
import ctypes
import os
from dataclasses import dataclass
from typing import Any

from dlm.train.memory import c_function

MADV_DONTNEED = 4  # Linux's madvise advice number
_SMAPS = "/proc/self/smaps"


@dataclass(frozen=True)
class FileMappings:
    """This process's clean file-backed mappings when read (`read_clean`).

    Attributes:
        starts, ends: sorted, non-overlapping address ranges `[start, end)` in bytes.
    """

    starts: tuple[int, ...] = ()
    ends: tuple[int, ...] = ()

    @classmethod
    def read_clean(cls, path: str = _SMAPS) -> FileMappings:
        """The file-backed mappings of this process with no written page (none on a
        system without `/proc/self/smaps`)."""
        ranges: list[tuple[int, int]] = []
        current: tuple[int, int] | None = None
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    head = line.split()
                    if head and "-" in head[0] and len(head) >= 5 and ":" not in head[0]:
                        low, high = (int(x, 16) for x in head[0].split("-"))
                        # a path (not [heap], [stack] or an anonymous map) and a real inode
                        current = (low, high) if len(head) >= 6 and head[4] != "0" and head[5].startswith("/") else None
                    elif current is not None and head[:1] == ["Anonymous:"]:
                        if head[1] == "0":
                            ranges.append(current)
                        current = None
        except OSError:
            return cls()
        ranges.sort()
        return cls(tuple(r[0] for r in ranges), tuple(r[1] for r in ranges))

    def drop(self, tensor: Any) -> int:
        """Give back the whole pages under `tensor`'s bytes (a contiguous CPU tensor no one
        will read again through this memory) when they lie in one of these mappings.
        Returns the bytes dropped (0 when not mapped, not contiguous or not Linux)."""
        if not self.starts or tensor.device.type != "cpu" or not tensor.is_contiguous():
            return 0
        start = tensor.data_ptr()
        end = start + tensor.numel() * tensor.element_size()
        at = bisect.bisect_right(self.starts, start) - 1
        if at < 0 or end > self.ends[at]:
            return 0
        page = os.sysconf("SC_PAGE_SIZE")
        low, high = -(-start // page) * page, end // page * page
        if high <= low or not _madvise(low, high - low, MADV_DONTNEED):
            return 0
        return high - low


def _madvise(address: int, length: int, advice: int) -> bool:
    madvise = c_function("madvise", [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int])
    return madvise is not None and madvise(ctypes.c_void_p(address), ctypes.c_size_t(length), advice) == 0

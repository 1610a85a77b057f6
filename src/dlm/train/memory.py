"""Giving freed memory back to the operating system: during the steps and between the
phases of a run.

glibc serves an allocation below its mmap threshold from the heap, and raises that
threshold (up to 32 MiB) each time it frees a mapped block; after the first step of a
long-sequence run every hidden-state tensor (4 x 2048 x 576 float32: 19 MB for
SmolLM2) lands in the heap, which only shrinks from its top, so freed activations stay
resident. With every setting at its default (`sequence_len` 2048, batch 4, bf16, the
2-core Zen 4), one step of `dlm train` peaked at 8.8 GB resident while the live
allocations never passed 2 GB (memray's high-water mark); with the threshold fixed at
16 MiB (`MALLOC_MMAP_THRESHOLD_=16777216`, what `limit_heap_growth` sets in-process) the
same step peaked at 3.0 GB, in 81 s against 86 s. At the demo's 4 x 128 tokens few
blocks of a step reach 16 MiB.

glibc's allocator keeps what a process frees in its heap for the next allocation, so
after training the freed activations and weights still count as resident while the
judge loads a float32 base model beside them. `release_freed_memory` collects Python's
garbage (the Trainer's reference cycles hold the trained model) and asks glibc to return
free heap pages (`malloc_trim(0)`). In the demo's `dlm train` (RSS sampled every
0.25 s) the process went from 1.96 GB at the end of the steps to 1.22 GB before the
judge loaded its model. The same release runs before the steps (what tokenization and
the held-out "before" pass freed) and after each of the probe report's passes
(`dlm.judge.report`), where each pass's working set would otherwise stay resident under
the next one's (`benchmarks/train_memory.py` prints a run's peak phase by phase).
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024


def _libc() -> ctypes.CDLL | None:
    """The C library this process already runs on (its symbols, without a search), on Linux."""
    return ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def limit_heap_growth() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD_BYTES` (module docstring): blocks
    that large are mapped and unmapped, never kept in the heap. Left alone when the user
    set `MALLOC_MMAP_THRESHOLD_`. Returns True when the threshold was set (Linux, glibc)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))


def release_freed_memory() -> bool:
    """Collect garbage and return free heap pages to the OS. Returns True when glibc's
    `malloc_trim` ran (Linux with glibc); elsewhere only the collection runs."""
    gc.collect()
    trim = getattr(_libc(), "malloc_trim", None)  # musl and other C libraries have none
    if trim is None:
        return False
    trim.argtypes = [ctypes.c_size_t]
    trim(0)
    return True

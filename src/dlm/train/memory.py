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
the next one's (`benchmarks/train_memory.py` prints a run's peak phase by phase). During
that report the threshold drops to 2 MiB (`mapped_scoring_blocks`), so a pass's
activations leave when freed instead of filling the holes of an arena.
"""

from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_T = TypeVar("_T")

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter number
OMP_PAUSE_SOFT = 1  # OpenMP 5.0's omp_pause_soft: the runtime's threads are released
MMAP_THRESHOLD_BYTES = 16 * 1024 * 1024
SCORING_MMAP_THRESHOLD_BYTES = 2 * 1024 * 1024


def libc() -> ctypes.CDLL | None:
    """The C library this process already runs on (its symbols, without a search), on Linux."""
    return ctypes.CDLL(None) if sys.platform.startswith("linux") else None


def c_function(name: str, argtypes: list[Any], restype: Any = ctypes.c_int) -> Any | None:
    """`name` from `libc()`, with its argument and result types set; None where there is
    no such function (not Linux, or a C library without it: musl has no `malloc_trim`,
    and `omp_pause_resource_all` is there only once an OpenMP runtime is loaded)."""
    function = getattr(libc(), name, None)
    if function is None:
        return None
    function.argtypes, function.restype = argtypes, restype
    return function


def limit_heap_growth() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD_BYTES` (module docstring): blocks
    that large are mapped and unmapped, never kept in the heap. Left alone when the user
    set `MALLOC_MMAP_THRESHOLD_`. Returns True when the threshold was set (Linux, glibc)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    return _mallopt_threshold(MMAP_THRESHOLD_BYTES)


def _mallopt_threshold(nbytes: int) -> bool:
    """Set glibc's mmap threshold to `nbytes`; False where there is no `mallopt`."""
    mallopt = c_function("mallopt", [ctypes.c_int, ctypes.c_int])
    return mallopt is not None and bool(mallopt(M_MMAP_THRESHOLD, nbytes))


@contextmanager
def mapped_scoring_blocks() -> Iterator[None]:
    """Within the block, every allocation of `SCORING_MMAP_THRESHOLD_BYTES` (2 MiB) or
    more is mapped on its own and unmapped when freed; on leaving, the threshold is
    `MMAP_THRESHOLD_BYTES` again. Left alone when the user set `MALLOC_MMAP_THRESHOLD_`.

    For `dlm train`'s probe report: each scoring pass's activations (at 1,024 tokens a
    batch, SmolLM2's hidden states are 2.4 MB and its MLP's 6.3 MB) otherwise land in the
    holes of an arena that a run's earlier passes spread out, and every page they touch
    stays resident until the pass ends. Smaller blocks, among them the bfloat16 copies
    autocast makes of each float32 weight on every forward (0.2 to 1.7 MB), stay in the
    heap, where reusing them costs no page fault. A block mapped afresh costs its page
    faults: five whole runs of the demo (`benchmarks/train_memory.py`) peaked at 1.42 to
    1.46 GB, their reports taking 43 to 53 s, against 1.43 to 1.62 GB and 43 to 46 s at
    16 MiB; at 256 KiB, 1.39 GB and 69 to 74 s (docs/determinism.md).

    Raises nothing: without glibc's `mallopt` the block runs as it is.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not _mallopt_threshold(SCORING_MMAP_THRESHOLD_BYTES):
        yield
        return
    try:
        yield
    finally:
        _mallopt_threshold(MMAP_THRESHOLD_BYTES)


def release_freed_memory() -> bool:
    """Collect garbage and return free heap pages to the OS. Returns True when glibc's
    `malloc_trim` ran (Linux with glibc); elsewhere only the collection runs."""
    gc.collect()
    trim = c_function("malloc_trim", [ctypes.c_size_t])
    if trim is None:
        return False
    trim(0)
    return True


def in_own_arena(work: Callable[[], _T], name: str = "dlm-own-arena") -> _T:
    """Call `work` on a new thread and wait for it; return its value or raise what it raised.

    glibc serves each thread from an arena, and a new thread gets one no thread has used,
    where the main thread's is the heap the steps spread out. After the steps and
    `release_freed_memory` that heap is wide and full of holes whose pages went back to
    the OS, and a later pass's allocations land in holes all over it, each page they touch
    resident again: when the probe report of a 5-step `dlm train examples/stdlib.dlm`
    began, the main heap spanned 0.97 GB with 0.22 GB in use, and each of the report's
    passes grew the process by 0.16 to 0.36 GB against 0.06 to 0.19 GB for the same pass
    in `dlm eval`, a fresh process. On a thread of its own the work's allocations are
    laid out afresh (docs/determinism.md has the measurements).

    The OpenMP runtime's threads are released first (`omp_pause_resource_all`): while the
    main thread's team exists, a second thread's parallel regions wait on each other's
    cores; a `[30, 576] x [576, 1536]` linear took 28% longer on the second thread, and
    the same time once the team was released. Where the runtime cannot be paused (no
    `omp_pause_resource_all`, not Linux) `work` runs on the calling thread.

    torch's settings that matter to the numbers are process-wide (thread count,
    deterministic algorithms) and `work` sets its own grad and autocast modes, so the
    results are those of the calling thread. The caller waits on an event that Ctrl-C
    interrupts; the work then stops at its next torch module call, unwinds there
    (its `finally` blocks and context managers run), and the caller re-raises. A process
    that exited with the thread still computing would abort in torch's teardown.

    Raises:
        BaseException: whatever `work` raised, re-raised on the calling thread.
    """
    pause = c_function("omp_pause_resource_all", [ctypes.c_int])
    if pause is None or pause(OMP_PAUSE_SOFT) != 0:
        return work()
    box: dict[str, object] = {}
    # waited on instead of the thread: on Python 3.11 a Thread.join that Ctrl-C interrupts
    # can mark a thread that still runs as stopped
    done = threading.Event()

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as err:  # handed to the caller, which decides
            box["error"] = err
        finally:
            done.set()

    thread = threading.Thread(target=run, name=name)
    try:
        thread.start()
        done.wait()
    except KeyboardInterrupt:
        _stop_at_next_module(thread, done)
        raise
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def _stop_at_next_module(thread: threading.Thread, done: threading.Event) -> None:
    """Make `thread` raise KeyboardInterrupt at its next torch module call and wait until
    it has unwound (`done`). A forward pre-hook raises from Python, where the interrupt
    would have surfaced on the main thread; an exception set from outside could land in a
    callback torch runs from C++ and abort the process. Further Ctrl-C while waiting is
    ignored: the work is already stopping."""
    import torch

    def stop(_module: object, _args: object) -> None:
        if threading.current_thread() is thread:
            raise KeyboardInterrupt

    handle = torch.nn.modules.module.register_module_forward_pre_hook(stop)
    try:
        while not done.is_set():
            try:
                done.wait()
            except KeyboardInterrupt:
                continue
    finally:
        handle.remove()
    thread.join()

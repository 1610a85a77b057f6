"""`dlm.train.memory`: glibc's mmap threshold fixed for the steps, freed heap returned."""

import subprocess
import sys
import textwrap
import threading
import types

import pytest

from dlm.train.memory import in_own_arena, limit_heap_growth, release_freed_memory

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")

# glibc's malloc and free, typed, for the scripts below (each runs in a process of its own)
LIBC = textwrap.dedent(
    """
    import ctypes
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    """
)

# Blocks of 17 MiB allocated after glibc saw a larger block freed (so its dynamic threshold
# serves them from the heap), each followed by a 256 KiB block that pins the heap above
# it, then freed: prints the resident megabytes they leave behind.
FRAGMENT = LIBC + textwrap.dedent(
    """
    import sys
    from dlm.train.memory import limit_heap_growth
    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * 4096
    if sys.argv[1] == "limit":
        assert limit_heap_growth()
    size = 17 * 1024 * 1024
    libc.free(libc.malloc(size + (1 << 20)))
    before = rss()
    big, pins = [], []
    for _ in range(20):
        p = libc.malloc(size)
        ctypes.memset(p, 1, size)
        big.append(p)
        pins.append(libc.malloc(256 * 1024))
    for p in big:
        libc.free(p)
    print((rss() - before) / 1e6)
    """
)


def _left_resident(mode: str) -> float:
    out = subprocess.run([sys.executable, "-c", FRAGMENT, mode], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


@glibc
def test_freed_large_blocks_leave_the_process_once_the_threshold_is_fixed():
    assert _left_resident("default") > 200  # glibc's own rule keeps them: the case is real
    assert _left_resident("limit") < 20


@glibc
def test_a_threshold_the_user_set_is_left_alone(monkeypatch):
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "1048576")
    assert limit_heap_growth() is False


# Whether a 4 MiB block is mapped on its own (glibc's IS_MMAPPED bit in the chunk's size
# word) before, inside and after `mapped_scoring_blocks`, with the steps' threshold set.
MAPPED = LIBC + textwrap.dedent(
    """
    from dlm.train.memory import limit_heap_growth, mapped_scoring_blocks
    def mapped():
        p = libc.malloc(4 << 20)
        bit = ctypes.c_size_t.from_address(p - ctypes.sizeof(ctypes.c_size_t)).value & 2
        libc.free(p)
        return "mapped" if bit else "heap"
    limit_heap_growth()
    seen = [mapped()]
    with mapped_scoring_blocks():
        seen.append(mapped())
    seen.append(mapped())
    print(" ".join(seen))
    """
)


def _mapped(env: dict[str, str]) -> str:
    run = subprocess.run([sys.executable, "-c", MAPPED], capture_output=True, text=True, check=True, env=env)
    return run.stdout.strip()


@glibc
def test_scoring_blocks_are_mapped_on_their_own_and_the_steps_threshold_comes_back():
    import os

    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    assert _mapped(env) == "heap mapped heap"


@glibc
def test_scoring_blocks_leave_a_threshold_the_user_set_alone():
    import os

    assert _mapped({**os.environ, "MALLOC_MMAP_THRESHOLD_": str(16 << 20)}) == "heap heap heap"


@glibc
def test_release_runs_malloc_trim():
    assert release_freed_memory() is True


def _pausable() -> bool:
    import ctypes

    import torch  # noqa: F401  loads the OpenMP runtime torch computes on

    return sys.platform.startswith("linux") and hasattr(ctypes.CDLL(None), "omp_pause_resource_all")


def test_own_arena_runs_the_work_on_a_new_thread_and_returns_its_value():
    pausable = _pausable()  # after torch has loaded its OpenMP runtime, as in `dlm train`
    caller = threading.get_ident()
    seen: list[tuple[int, str]] = []

    def work() -> int:
        seen.append((threading.get_ident(), threading.current_thread().name))
        return 42

    assert in_own_arena(work) == 42
    ((ident, name),) = seen
    if pausable:
        assert ident != caller and name == "dlm-own-arena"
    else:
        assert ident == caller


def test_own_arena_raises_what_the_work_raised_on_the_calling_thread():
    boom = KeyboardInterrupt("stop")

    def work() -> None:
        raise boom

    with pytest.raises(KeyboardInterrupt) as caught:
        in_own_arena(work)
    assert caught.value is boom


def test_without_an_openmp_runtime_to_pause_the_work_stays_on_the_calling_thread(monkeypatch):
    import dlm.train.memory as memory

    monkeypatch.setattr(memory, "libc", lambda: None)
    assert in_own_arena(threading.get_ident) == threading.get_ident()


@glibc
def test_the_openmp_runtime_is_paused_before_the_thread_starts(monkeypatch):
    import dlm.train.memory as memory

    calls: list[int] = []

    def pause(kind: int) -> int:
        calls.append(kind)
        return 0

    monkeypatch.setattr(memory, "libc", lambda: types.SimpleNamespace(omp_pause_resource_all=pause))
    assert in_own_arena(lambda: threading.current_thread().name) == "dlm-own-arena"
    assert calls == [memory.OMP_PAUSE_SOFT]


def test_ctrl_c_stops_the_work_at_its_next_module_call_before_the_caller_raises():
    import _thread

    import torch

    if not _pausable():
        pytest.skip("no OpenMP runtime to pause: the work runs on the calling thread")
    layer = torch.nn.Linear(8, 8)
    calls, unwound, threads = [], [], []

    def work() -> None:
        threads.append(threading.current_thread())
        _thread.interrupt_main()  # Ctrl-C, as the caller waits
        try:
            for _ in range(100_000):
                layer(torch.zeros(1, 8))
                calls.append(1)
        finally:
            unwound.append(True)

    with pytest.raises(KeyboardInterrupt):
        in_own_arena(work)
    assert unwound == [True] and not threads[0].is_alive()
    assert len(calls) < 100_000  # stopped, not run to the end

"""`dlm.train.memory`: glibc's mmap threshold fixed for the steps, freed heap returned."""

import subprocess
import sys
import textwrap

import pytest

from dlm.train.memory import limit_heap_growth, release_freed_memory

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")

# Blocks of 17 MiB allocated after glibc saw a larger block freed (so its dynamic threshold
# serves them from the heap), each followed by a 256 KiB block that pins the heap above
# it, then freed: prints the resident megabytes they leave behind.
FRAGMENT = textwrap.dedent(
    """
    import ctypes, sys
    from dlm.train.memory import limit_heap_growth
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
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


@glibc
def test_release_runs_malloc_trim():
    assert release_freed_memory() is True

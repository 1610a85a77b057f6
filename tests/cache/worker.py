"""Subprocess side of the reliability tests (run as a script, never imported by pytest).

worker.py write CACHE ROOT [N SEED]   write new entries forever, printing a line per batch;
                                      with N: SIGKILL itself inside its Nth segment write,
                                      after writing a random prefix of the bytes
worker.py race CACHE ROOT N MAX       N cached runs under eviction, each checked vs plain
worker.py fsize CACHE ROOT LIMIT      one cold run with RLIMIT_FSIZE=LIMIT bytes
"""

from __future__ import annotations

import json
import os
import random
import resource
import signal
import sys
from pathlib import Path

from cachehelp import FAKE_SHA, FakeTokenizer, row_set, same_rows

from dlm.cache import CachedRowEncoder
from dlm.errors import CacheError
from dlm.rows.types import RowSet, TextRow
from dlm.tokenize.plain import PlainRowEncoder


class LineProgress:
    def start(self, description: str, total: int) -> None:
        pass

    def advance(self, n: int) -> None:
        print("advance", n, flush=True)


def cached(cache: Path, run: str, max_bytes: int = 1 << 30, **kw) -> CachedRowEncoder:
    return CachedRowEncoder(
        cache, FakeTokenizer(), FAKE_SHA, max_bytes=max_bytes, run_id=run, batch_rows=3, max_segment_bytes=8192, **kw
    )


def dying_write(calls_left: int, seed: int):
    """An `os.write` that kills the process inside call number `calls_left`."""
    rng = random.Random(seed)
    state = {"left": calls_left}

    def write(fd: int, data: memoryview) -> int:
        state["left"] -= 1
        if state["left"] <= 0:
            os.write(fd, data[: rng.randint(0, len(data))])
            os.kill(os.getpid(), signal.SIGKILL)
        return os.write(fd, data)

    return write


def write(cache: Path, root: Path, kill_at: int | None, seed: int) -> None:
    base = row_set(root)
    kw = {"segment_write": dying_write(kill_at, seed)} if kill_at else {}
    for gen in range(10**6):
        extra = [TextRow("prose", f"generation {gen} row {i} " * 20, "w:1") for i in range(9)]
        rows = RowSet([*base.text_rows, *extra], base.file_rows)
        cached(cache, f"w{gen}", **kw).tokenize(rows, LineProgress())


def race(cache: Path, root: Path, runs: int, max_bytes: int) -> None:
    rows = row_set(root)
    want = PlainRowEncoder(FakeTokenizer(), FAKE_SHA).tokenize(rows)
    out = {"runs": 0, "mismatches": 0, "corrupt": 0, "warnings": []}
    for i in range(runs):
        tok = cached(cache, f"race{i}", max_bytes)
        got = tok.tokenize(rows)
        out["runs"] += 1
        out["mismatches"] += not same_rows(got, want)
        out["corrupt"] += tok.last_report.corrupt
        out["warnings"] += tok.last_report.warnings
    print(json.dumps(out), flush=True)


def fsize(cache: Path, root: Path, limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        cached(cache, "fsize").tokenize(row_set(root))
    except CacheError as exc:
        print("CacheError:", exc, flush=True)
        sys.exit(3)


if __name__ == "__main__":
    mode, cache, root = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    if mode == "write":
        write(
            cache, root, int(sys.argv[4]) if len(sys.argv) > 4 else None, int(sys.argv[5]) if len(sys.argv) > 5 else 0
        )
    elif mode == "race":
        race(cache, root, int(sys.argv[4]), int(sys.argv[5]))
    else:
        fsize(cache, root, int(sys.argv[4]))

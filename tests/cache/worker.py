"""Subprocess side of the reliability tests (run as a script, never imported by pytest).

    worker.py write CACHE ROOT            write new entries forever, printing a line per batch
    worker.py race CACHE ROOT N MAX       N cached runs under eviction, each checked vs plain
    worker.py fsize CACHE ROOT LIMIT      one cold run with RLIMIT_FSIZE=LIMIT bytes
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

from cachehelp import FAKE_SHA, FakeTokenizer, row_set, same_rows

from dlm.cache import CachedRowTokenizer
from dlm.errors import CacheError
from dlm.tokenize.plain import PlainRowTokenizer
from dlm.tokenize.seam import RowSet, TextRow


class LineProgress:
    def start(self, description: str, total: int) -> None:
        pass

    def advance(self, n: int) -> None:
        print("advance", n, flush=True)


def cached(cache: Path, run: str, max_bytes: int = 1 << 30) -> CachedRowTokenizer:
    return CachedRowTokenizer(cache, FakeTokenizer(), FAKE_SHA, max_bytes=max_bytes, run_id=run,
                              batch_rows=3, max_segment_bytes=8192)


def write(cache: Path, root: Path) -> None:
    base = row_set(root)
    for gen in range(10**6):
        extra = [TextRow("prose", f"generation {gen} row {i} " * 20, "w:1") for i in range(9)]
        cached(cache, f"w{gen}").tokenize(RowSet([*base.text_rows, *extra], base.file_rows), LineProgress())


def race(cache: Path, root: Path, runs: int, max_bytes: int) -> None:
    rows = row_set(root)
    want = PlainRowTokenizer(FakeTokenizer(), FAKE_SHA).tokenize(rows)
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
        write(cache, root)
    elif mode == "race":
        race(cache, root, int(sys.argv[4]), int(sys.argv[5]))
    else:
        fsize(cache, root, int(sys.argv[4]))

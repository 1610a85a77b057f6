"""Source walk: folders listed in line vs listed by worker threads ahead of the walk.

    .venv/bin/python benchmarks/walk.py --linux-root DIR [--repeats 5]

Walks the whole Linux tree (default per-file cap, every file stat-ed) and the
standard library in one process, alternating `listing.THREADS = 0` (in line) and the
default, checks both give the same files and skips, and prints the median seconds of
each and their ratio. Other processes on the machine disturb absolute numbers.
"""

from __future__ import annotations

import argparse
import statistics
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace

import dlm.rows.listing as listing
from dlm.rows.walk import walk_sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--linux-root", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    corpora = [("stdlib", SimpleNamespace(path=sysconfig.get_paths()["stdlib"], include=["**/*.py"],
                                          exclude=["site-packages/", "__pycache__/"],
                                          max_bytes_per_file=1_000_000, max_files=None))]
    if args.linux_root:
        corpora.append(("linux", SimpleNamespace(path=str(args.linux_root), include=["**/*"], exclude=[".git/"],
                                                 max_bytes_per_file=1_000_000, max_files=None)))
    threads = listing.THREADS
    print(f"| corpus | files | in line s | {threads} threads s | in line / threads |")
    print("|---|---|---|---|---|")
    for name, c in corpora:
        times: dict[int, list[float]] = {0: [], threads: []}
        results = {}
        for _ in range(args.repeats):
            for n in (0, threads):
                listing.THREADS = n
                start = time.perf_counter()
                w = walk_sources([c], Path("."))
                times[n].append(time.perf_counter() - start)
                results[n] = ([tuple(f) for f in w.files], dict(w.skipped), w.notes)
        assert results[0] == results[threads]
        a, b = statistics.median(times[0]), statistics.median(times[threads])
        print(f"| {name} | {len(results[0][0]):,} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
    listing.THREADS = threads


if __name__ == "__main__":
    main()

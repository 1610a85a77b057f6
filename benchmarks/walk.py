"""Source walk: folders listed by the native extension (the default where it is built),
and in Python: in line, by the Python default (in line until listings prove slow), and
always by worker threads ahead of the walk.

    .venv/bin/python benchmarks/walk.py --linux-root DIR [--repeats 5]

Walks the whole Linux tree (default per-file cap, every file stat-ed) and the
standard library in one process, rotating the three ways, checks they give the same
files and skips, and prints the median seconds of each and the ratios, beside the
floor of any walk that checks every file: `os.stat` of the taken files alone, in a loop. The trees are
in the kernel's caches after the first walk, so this is the warm case; other
processes on the machine disturb absolute numbers.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sysconfig
import time
from pathlib import Path
from types import SimpleNamespace

import dlm.rows.listing as listing
import dlm.rows.nativelist as nativelist
from dlm.rows.walk import walk_sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--linux-root", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    corpora = [
        (
            "stdlib",
            SimpleNamespace(
                path=sysconfig.get_paths()["stdlib"],
                include=["**/*.py"],
                exclude=["site-packages/", "__pycache__/"],
                max_bytes_per_file=1_000_000,
                max_files=None,
            ),
        )
    ]
    if args.linux_root:
        corpora.append(
            (
                "linux",
                SimpleNamespace(
                    path=str(args.linux_root),
                    include=["**/*"],
                    exclude=[".git/"],
                    max_bytes_per_file=1_000_000,
                    max_files=None,
                ),
            )
        )
    if not nativelist.available():
        raise SystemExit("dlm.rows._fastlist is not built: make install (needs a C compiler)")
    native = nativelist._fastlist
    threads, slow, probe = listing.THREADS, listing.WAIT_RATIO, listing.PROBE_ENTRIES
    ways = {
        "native": (native, threads, slow, probe),
        "in line": (None, 0, slow, probe),
        "default": (None, threads, slow, probe),
        "threads": (None, threads, 0.0, 0),
    }
    print(
        f"| corpus | files | native s | in line s | Python default s | {threads} threads always s "
        f"| native / in line | threads / in line | os.stat of the files alone s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, c in corpora:
        times: dict[str, list[float]] = {way: [] for way in ways}
        results = {}
        for _ in range(args.repeats):
            for way, (nativelist._fastlist, listing.THREADS, listing.WAIT_RATIO, listing.PROBE_ENTRIES) in ways.items():
                start = time.perf_counter()
                w = walk_sources([c], Path("."))
                times[way].append(time.perf_counter() - start)
                results[way] = ([tuple(f) for f in w.files], dict(w.skipped), w.notes)
            paths = [f[1] for f in results["in line"][0]]
            start = time.perf_counter()
            list(map(os.stat, paths))
            times.setdefault("stat", []).append(time.perf_counter() - start)
        assert results["native"] == results["in line"] == results["default"] == results["threads"]
        med = {way: statistics.median(t) for way, t in times.items()}
        print(
            f"| {name} | {len(results['in line'][0]):,} | {med['native']:.3f} | {med['in line']:.3f} "
            f"| {med['default']:.3f} | {med['threads']:.3f} | {med['native'] / med['in line']:.2f}x "
            f"| {med['threads'] / med['in line']:.2f}x | {med['stat']:.3f} |"
        )
    nativelist._fastlist = native
    listing.THREADS, listing.WAIT_RATIO, listing.PROBE_ENTRIES = threads, slow, probe


if __name__ == "__main__":
    main()

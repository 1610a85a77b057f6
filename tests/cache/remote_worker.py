"""Subprocess side of the kill -9 tests (run as a script, never imported by pytest).

    remote_worker.py push HOME TREE URL   a cold run in HOME, pushing to URL, forever
    remote_worker.py pull HOME TREE URL   runs that pull everything from URL, forever
Prints one line once started; the test kills it at a random moment.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from cachehelp import row_set
from remotehelp import run_home


def main() -> None:
    mode, home, tree, url = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    rows = row_set(tree)
    print("started", flush=True)
    n = 0
    while True:
        n += 1
        if mode == "pull":  # a fresh store each time, so every run pulls
            shutil.rmtree(home / "store", ignore_errors=True)
            shutil.rmtree(home / "state", ignore_errors=True)
        run_home(home, rows, url, run_id=f"w{n}", batch_rows=20, max_segment_bytes=8192)
        if mode == "push":  # forget what was pushed: push it all again
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

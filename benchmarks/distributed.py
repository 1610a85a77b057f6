"""One rank against two on CPU: tokens/s and seconds from launch to the first step.

    .venv/bin/python benchmarks/distributed.py [--max-steps 10] [--doc examples/stdlib.dlm]

For 1 and then 2 ranks (`dlm train DOC --nproc N --max-steps S --json`, each in a
fresh process), twice on one fresh `DLM_HOME`: cold (empty section cache: rank 0
tokenizes the corpus, the other rank waits at the barrier and then reads the cache)
and warm (every row cached). Measured per run: seconds from starting the command to
rank 0 logging step 1 (polled in the store's metrics.sqlite), the whole command,
tokenize seconds, each rank's hits/misses and its seconds from its turn to rows ready
(`ready_s`: walk + tokenize after the barrier), and training tokens/s over all ranks
(`train_tokens / train_seconds` of the report). Threads: `OMP_NUM_THREADS` as set,
else `dlm` gives each rank an equal share of the cores (one process: torch's default).

Then the side-by-side table with ratios (2 ranks / 1 rank). Other processes on the
machine disturb absolute numbers; `uptime` is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def _first_step_seconds(metrics: Path, known: set[str], t0: float, proc: subprocess.Popen) -> float | None:
    """Poll metrics.sqlite until a run not in `known` has step 1; seconds since `t0`."""
    while proc.poll() is None:
        if metrics.is_file():
            try:
                with sqlite3.connect(metrics) as db:
                    rows = db.execute("SELECT run_id FROM steps WHERE step = 1").fetchall()
            except sqlite3.Error:
                rows = []
            if any(r not in known for (r,) in rows):
                return time.perf_counter() - t0
        time.sleep(0.1)
    return None


def run_once(doc: Path, nproc: int, home: Path, steps: int, dlm_id: str) -> dict[str, Any]:
    env = dict(os.environ, DLM_HOME=str(home), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    metrics = home / "store" / dlm_id / "metrics.sqlite"
    known: set[str] = set()
    if metrics.is_file():
        with sqlite3.connect(metrics) as db:
            known = {r for (r,) in db.execute("SELECT run_id FROM runs")}
    cmd = [sys.executable, "-m", "dlm", "train", str(doc), "--nproc", str(nproc), "--max-steps", str(steps), "--json"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = _first_step_seconds(metrics, known, t0, proc)
    out, err = proc.communicate()
    total = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-3000:]}")
    report = json.loads(out)
    ranks = (report["distributed"] or {}).get("ranks") or [
        {
            "rank": 0,
            "cache_hits": report["tokenization"]["cache_hits"],
            "cache_misses": report["tokenization"]["cache_misses"],
        }
    ]
    return {
        "first_step_s": first,
        "total_s": total,
        "tokenize_s": report["tokenization"]["total_tokenize_seconds"],
        "tokens_per_s": report["train_tokens"] / report["train_seconds"] if report["train_seconds"] else None,
        "train_tokens": report["train_tokens"],
        "steps": report["steps"],
        "ranks": " ".join(f"r{r['rank']}:{r['cache_hits']}h/{r['cache_misses']}m" for r in ranks),
        "ready_s": " ".join(f"r{r['rank']}:{r.get('ready_seconds', '-')}" for r in ranks),
    }


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--doc", type=Path, default=REPO / "examples" / "stdlib.dlm")
    parser.add_argument("--max-steps", type=int, default=10)
    args = parser.parse_args()
    dlm_id = re.search(r"^dlm_id: (\S+)$", args.doc.read_text(), re.M).group(1)  # type: ignore[union-attr]
    print(f"before: {_uptime()}\ncpus: {os.cpu_count()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}")
    results: dict[tuple[int, str], dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="dlm-bench-dist-") as tmp:
        for nproc in (1, 2):
            home = Path(tmp) / f"home-{nproc}"
            for phase in ("cold", "warm"):
                results[nproc, phase] = run_once(args.doc, nproc, home, args.max_steps, dlm_id)
                print(f"{nproc} rank(s) {phase}: {results[nproc, phase]}", flush=True)
    print(f"after: {_uptime()}\n")
    keys = ["first_step_s", "total_s", "tokenize_s", "tokens_per_s", "train_tokens", "ranks", "ready_s"]
    print(
        f"{'':14} | {'1 rank cold':>16} | {'2 ranks cold':>16} | {'ratio':>6} | {'1 rank warm':>16} | "
        f"{'2 ranks warm':>16} | {'ratio':>6}"
    )
    for key in keys:
        cells = []
        for phase in ("cold", "warm"):
            one, two = results[1, phase][key], results[2, phase][key]
            ratio = f"{two / one:.2f}" if isinstance(one, float) and isinstance(two, float) and one else ""
            cells += [f"{_fmt(one):>16}", f"{_fmt(two):>16}", f"{ratio:>6}"]
        print(f"{key:14} | " + " | ".join(cells))


if __name__ == "__main__":
    main()

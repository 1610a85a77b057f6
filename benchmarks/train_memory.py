"""Where a whole `dlm train` run's resident memory goes, phase by phase.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/train_memory.py [--doc examples/stdlib.dlm]
        [--rounds 2] [--baseline REF | --against-doc OTHER.dlm] [-- EXTRA DLM TRAIN ARGS]

Each run is `dlm train DOC` as the document sets it, the closing probe report included,
in a fresh `DLM_HOME` and a fresh models folder that links the caller's materialized base
models (`DLM_MODELS_DIR`, default `.dlm-test-models`): the model is on disk, and
everything else is cold as on a user's first run (the tokenized-section cache, the
held-out and probe memos, the general set's base score). A thread reads the process's
`/proc/PID/status` every 0.1 s (VmRSS, RssAnon, RssFile, VmHWM); the run's progress
lines cut it into phases (`tokenizing:`, `recipe:`, the held-out `(before)` and
`(after)` lines, `train:`, `evaluating`), and each phase is printed with its seconds and
its peak RSS split into anonymous and file-backed pages (mapped weights, libraries).
`peak` is the kernel's high-water mark (VmHWM), what `/usr/bin/time -v` reports.

With `--baseline REF` that commit's `dlm` (a detached worktree,
`train_throughput.baseline_tree`) runs the same document interleaved with today's
(baseline, today, today, baseline, ...), and the medians of each side are printed with
today / baseline ratios. With `--against-doc` a second document (the same one with other
settings, say) runs on today's tree interleaved with `--doc` in the same way, printed as
the `other` side with other / today ratios. Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE_SECONDS = 0.1
# progress lines that open a phase, in the order a run prints them
MARKERS = (
    ("tokenize", re.compile(r"^tokenizing: ")),
    ("model + held-out before", re.compile(r"^recipe: ")),
    ("trainer setup", re.compile(r"^held-out loss .* \(before\)")),
    ("steps", re.compile(r"^train: ")),
    ("held-out after + save", re.compile(r"^held-out loss .* \(after\)")),
    ("probe report", re.compile(r"^evaluating ")),
)
GB = 1e9


def fresh_models(models: Path, into: Path) -> Path:
    """A models folder whose entries link `models`' own, without its memo of base scores."""
    into.mkdir()
    for entry in models.iterdir():
        if not entry.name.startswith("general-scores"):
            (into / entry.name).symlink_to(entry.resolve())
    return into


def status(pid: int) -> dict[str, int] | None:
    """RSS figures of `pid` in bytes, None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    try:
        return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "RssAnon", "RssFile", "VmHWM")}
    except (KeyError, ValueError):
        return None


def one_run(cmd: list[str], env: dict[str, str]) -> dict:
    """Run `cmd`; the phases it went through with their seconds and peak RSS figures."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples: list[tuple[float, dict[str, int]]] = []

    def sample() -> None:
        while proc.poll() is None:
            got = status(proc.pid)
            if got is not None:
                samples.append((time.perf_counter() - t0, got))
            time.sleep(SAMPLE_SECONDS)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    cuts: list[tuple[float, str]] = [(0.0, "start + imports")]
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:  # progress lines go to stdout, notes to stderr
        tail = [*tail[-40:], line]
        for name, pattern in MARKERS:
            if pattern.search(line) and name not in {c[1] for c in cuts}:
                cuts.append((time.perf_counter() - t0, name))
    proc.wait()
    sampler.join()
    wall = time.perf_counter() - t0
    if proc.returncode or not samples:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{''.join(tail)}")
    phases = {}
    for (start, name), (end, _) in zip(cuts, [*cuts[1:], (wall, "")], strict=True):
        inside = [s for t, s in samples if start <= t < end] or [min(samples, key=lambda ts: abs(ts[0] - start))[1]]
        top = max(inside, key=lambda s: s["VmRSS"])
        phases[name] = {"seconds": end - start, "rss": top["VmRSS"], "anon": top["RssAnon"], "file": top["RssFile"]}
    return {"phases": phases, "peak": samples[-1][1]["VmHWM"], "wall": wall}


def run_side(tree: Path, doc: Path, models: Path, extra: list[str], tmp: Path, tag: str) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"{tag}-", dir=tmp))
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "DLM_HOME": str(home / "home"),
        "DLM_MODELS_DIR": str(fresh_models(models, home / "models")),
        "PYTHONPATH": str(tree / "src"),
    }
    return one_run([sys.executable, "-m", "dlm", "train", str(doc), *extra], env)


def print_side(name: str, runs: list[dict]) -> dict[str, float]:
    """Medians of `runs`, printed as a table; returns each phase's median peak RSS and the totals."""
    print(f"\n{name} ({len(runs)} runs, medians)")
    print(f"  {'phase':26s} {'seconds':>8s} {'RSS GB':>7s} {'anon':>6s} {'file':>6s}")
    medians: dict[str, float] = {}
    for phase in runs[0]["phases"]:
        rows = [r["phases"][phase] for r in runs if phase in r["phases"]]
        med = {k: statistics.median(row[k] for row in rows) for k in ("seconds", "rss", "anon", "file")}
        medians[phase] = med["rss"]
        print(
            f"  {phase:26s} {med['seconds']:8.1f} {med['rss'] / GB:7.2f} {med['anon'] / GB:6.2f} {med['file'] / GB:6.2f}"
        )
    medians["peak (VmHWM)"] = statistics.median(r["peak"] for r in runs)
    medians["wall"] = statistics.median(r["wall"] for r in runs)
    peaks = ", ".join(f"{r['peak'] / GB:.2f}" for r in runs)
    walls = ", ".join(f"{r['wall']:.1f}" for r in runs)
    print(f"  peak {medians['peak (VmHWM)'] / GB:.2f} GB (each run: {peaks})")
    print(f"  wall {medians['wall']:.1f} s (each run: {walls})")
    return medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--doc", default=str(REPO / "examples" / "stdlib.dlm"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--baseline", help="an older commit whose dlm train runs interleaved with today's")
    parser.add_argument("--against-doc", help="a second document run interleaved with --doc on today's tree")
    parser.add_argument("extra", nargs="*", help="more `dlm train` arguments (after --)")
    args = parser.parse_args()
    if args.baseline and args.against_doc:
        parser.error("--baseline and --against-doc compare different things: give one")
    models = Path(os.environ.get("DLM_MODELS_DIR", REPO / ".dlm-test-models")).resolve()
    with tempfile.TemporaryDirectory(prefix="dlm-train-memory-") as scratch:
        tmp = Path(scratch)
        trees = {"today": REPO}
        docs = {"today": Path(args.doc).resolve()}
        if args.against_doc:
            trees["other"], docs["other"] = REPO, Path(args.against_doc).resolve()
        if args.baseline:
            sys.path.insert(0, str(Path(__file__).parent))
            from train_throughput import baseline_tree

            trees = {"baseline": baseline_tree(args.baseline, tmp), **trees}
            docs["baseline"] = docs["today"]
        try:
            runs: dict[str, list[dict]] = {side: [] for side in trees}
            for k in range(args.rounds):
                order = list(trees) if k % 2 == 0 else list(reversed(trees))
                for side in order:
                    got = run_side(trees[side], docs[side], models, args.extra, tmp, side)
                    runs[side].append(got)
                    print(f"round {k + 1} {side}: peak {got['peak'] / GB:.2f} GB, {got['wall']:.1f} s", flush=True)
            medians = {side: print_side(side, got) for side, got in runs.items()}
            if len(medians) == 2:
                new, old = ("today", "baseline") if args.baseline else ("other", "today")
                print(f"\n{new} / {args.baseline or old}")
                for key, value in medians[new].items():
                    if key in medians[old]:
                        print(f"  {key:26s} {value / medians[old][key]:.2f}x")
        finally:
            if args.baseline:
                tree = tmp / "baseline"
                subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)


if __name__ == "__main__":
    main()

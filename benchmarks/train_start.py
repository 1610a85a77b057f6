"""Where `dlm train --max-steps 1` spends its time before the end of its first step.

    .venv/bin/python benchmarks/train_start.py [--doc examples/stdlib.dlm] [--repeats 3] [--src DIR]

In a fresh `DLM_HOME` (offline): one cold run fills the tokenized-section cache (and the
remembered base-model score), then `--repeats` warm runs, each a fresh process stopped
at the end of its first step (Ctrl-C there: the run is recorded as interrupted, the
store is left as it was). Each warm run imports the training stack first, so that the
phases after it are the work alone, and times each phase by wrapping the functions
`dlm.actions.training.plan` and `dlm.actions.training.publish` call. A separate fresh process times
the imports package by package. Prints the median of each phase, with the load average
at the start of each run: another process on the machine slows every phase (two torch
threads that share a core with it wait on each other), so compare runs of one sitting.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

IMPORTS = """
import json, sys, time
out = {}
t0 = time.perf_counter()
def step(name, stmt):
    global t0
    exec(stmt, globals())
    t = time.perf_counter(); out[name] = t - t0; t0 = t
step("dlm.cli.main (typer, rich, dlm's own)", "import dlm.cli.main")
step("torch", "import torch")
step("transformers", "import transformers; from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast")
step("accelerate", "import accelerate")
step("datasets", "import datasets")
step("peft (with torch._dynamo, inductor)", "from peft import LoraConfig, get_peft_model")
step("trl", "from trl import SFTConfig, SFTTrainer; import transformers.trainer")
step("dlm.actions.training", "import dlm.actions.training")
print("BENCH " + json.dumps(out), file=sys.stderr)
"""

RUN = """
import functools, json, os, sys, time
T0 = float(sys.argv.pop(1))
marks = [("python start -> dlm.cli.main imported", None)]
last = [T0]
def mark(name):
    now = time.time(); marks.append((name, now - last[0])); last[0] = now
from dlm.cli.main import app
mark("python start -> dlm.cli.main imported")
import dlm.actions.training.publish as P, dlm.actions.training.plan as T, dlm.cli.progress as progress
import dlm.train.tracking as TR
import transformers.trainer as TT
from trl import SFTTrainer  # noqa: F401
mark("imports: torch, transformers, trl, peft, datasets, accelerate")
def timed(owner, name, label):
    fn = getattr(owner, name, None)
    if fn is None:  # a phase this version does not have
        return
    @functools.wraps(fn)
    def wrapped(*a, **k):
        mark("between phases (CLI, document, store, lock)")
        try:
            return fn(*a, **k)
        finally:
            mark(label)
    setattr(owner, name, wrapped)
for name, label in [("resolve_base_model", "resolve base model (warm: the identity file)"),
                    ("load_tokenizer", "load tokenizer"), ("tokenizer_sha256", "tokenizer fingerprint"),
                    ("build_rows", "rows: walk the sources"), ("make_row_encoder", "open the cache"),
                    ("split_rows", "held-out split"), ("build_dataset", "training examples")]:
    timed(T, name, label)
from dlm.cache import CachedRowEncoder
timed(CachedRowEncoder, "tokenize", "tokenize (cache lookups)")
timed(T, "_seed", "seed and deterministic switches")
timed(T, "_check_lock", "determinism lock check")
timed(P, "load_model", "load model")
measure = TR.HeldOutTracker.measure
def scored(self, model, phase, step):
    mark("between phases (CLI, document, store, lock)")
    measure(self, model, phase, step)
    if phase == "before":
        mark("held-out score of the base model")
TR.HeldOutTracker.measure = scored
train = TT.Trainer.train
def trainer_train(self, *a, **k):
    mark("Trainer construction (peft wrap)")
    return train(self, *a, **k)
TT.Trainer.train = trainer_train
def first_step(on_step):
    def wrapped(self, step, *rest):
        mark("first step (Trainer set-up, forward, backward, optimizer)")
        raise KeyboardInterrupt
    return wrapped
for sink in (progress.RichTrainSink, progress.PlainTrainSink):
    sink.on_step = first_step(sink.on_step)
try:
    app(sys.argv[1:], standalone_mode=False)
except KeyboardInterrupt:
    pass
totals = {}
for name, seconds in marks[1:]:
    totals[name] = totals.get(name, 0.0) + seconds
print("BENCH " + json.dumps(totals), file=sys.stderr)
"""


def child(code: str, argv: list[str], env: dict[str, str]) -> object:
    proc = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True, text=True, check=False)
    if "BENCH " not in proc.stderr:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stderr.rsplit("BENCH ", 1)[1].strip().splitlines()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--doc", type=Path, default=REPO / "examples" / "stdlib.dlm")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--home", type=Path, help="a DLM_HOME whose cache is already warm (skips the cold run)")
    parser.add_argument(
        "--src",
        type=Path,
        default=REPO / "src",
        help="the dlm package folder to time (another commit's `git archive` of src/)",
    )
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="dlm-train-start-"))
    env = dict(os.environ, DLM_HOME=str(home), HF_HUB_OFFLINE="1", PYTHONPATH=str(args.src))
    if args.home is None:
        start = time.time()
        subprocess.run(
            [sys.executable, "-m", "dlm", "train", str(args.doc), "--max-steps", "1"],
            env=env,
            capture_output=True,
            check=True,
        )
        print(f"cold run (fills the cache): {time.time() - start:.1f} s", file=sys.stderr)
    loads, runs = [], []
    for _ in range(args.repeats):
        loads.append(os.getloadavg()[0])
        runs.append(dict(child(RUN, [repr(time.time()), "train", str(args.doc), "--max-steps", "1"], env)))
    imports = child(IMPORTS, [], env)
    phases = list(runs[0])
    print(f"warm runs: {args.repeats}; 1-minute load at their starts: {', '.join(f'{x:.2f}' for x in loads)}")
    print("| phase | median s | runs |")
    print("|---|---|---|")
    for phase in phases:
        values = [r.get(phase, 0.0) for r in runs]
        print(f"| {phase} | {statistics.median(values):.2f} | {' '.join(f'{v:.2f}' for v in values)} |")
    total = [sum(r.values()) for r in runs]
    print(
        f"| **process start -> end of first step** | **{statistics.median(total):.2f}** | "
        f"{' '.join(f'{v:.2f}' for v in total)} |"
    )
    print("\n| import (fresh process, in this order) | s |")
    print("|---|---|")
    for name, seconds in imports.items():  # type: ignore[union-attr]
        print(f"| {name} | {seconds:.2f} |")


if __name__ == "__main__":
    main()

"""Seconds per training step with torch's CPU kernels pinned to AVX2 vs native, side by side.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/cpu_isa.py [--steps 8] [--rounds 2] [--threads 1]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/cpu_isa.py --doc tests/golden/determinism/golden.dlm \\
        --configs native,pinned,aten-only,pinned-cbwr,native-cbwr --rounds 1

Each run is `python -m dlm train DOC --json` in a fresh process with a fresh `DLM_HOME`
(base model shared), one configuration per run, configurations alternating in order
from round to round so drifting machine load hits each alike:

    native       DLM_CPU_ISA=native: torch and MKL pick the fastest ISA (AVX512 where the CPU has it)
    pinned       the default: dlm sets ATEN_CPU_CAPABILITY=avx2 and MKL_ENABLE_INSTRUCTIONS=AVX2
    aten-only    ATEN_CPU_CAPABILITY=avx2 set by the caller, so dlm sets nothing (MKL uncapped)
    pinned-cbwr  the pin plus MKL_CBWR=AVX2 and ONEDNN_MAX_CPU_ISA=AVX2
    native-cbwr  native, with MKL_CBWR=AVX2 and ONEDNN_MAX_CPU_ISA=AVX2

The default document trains on dlm's own source files (batch 4, sequence_len 128, LoRA r 8,
like `examples/stdlib.dlm`). Seconds per step is the median of the per-step times the
metrics database records, first step of each run left out (warm-up). The script also
prints, per configuration, the capability torch really used (from the lock) and the
adapter hash: equal hashes mean byte-identical adapters. With `--doc` pointing at the
golden document and its own step count (no `--steps`), `pinned` must print the golden's
hash. Absolute times depend on what else runs on the machine; the ratio is the result.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ISA_VARS = ("ATEN_CPU_CAPABILITY", "DLM_CPU_ISA", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")
CBWR = {"MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
CONFIGS: dict[str, dict[str, str]] = {
    "native": {"DLM_CPU_ISA": "native"},
    "pinned": {},
    "aten-only": {"ATEN_CPU_CAPABILITY": "avx2"},
    "pinned-cbwr": dict(CBWR),
    "native-cbwr": {"DLM_CPU_ISA": "native", **CBWR},
}

SOURCE_DOC = """---
dlm_id: 01M86HC2T9GSECHY5E7NM80APK
dlm_version: 1
base_model: smollm2-135m
training:
  lora_r: 8
  lora_alpha: 16
  learning_rate: 0.0003
  batch_size: 4
  sequence_len: 128
  max_steps: 8
  seed: 42
  sources:
    - path: {src}
      include: ["**/*.py"]
      exclude: ["__pycache__/"]
---

# dlm's own source

Every Python file of the dlm package becomes one training row.
"""


def child_env(config: str, home: Path, models: Path, threads: int) -> dict[str, str]:
    """The environment of one run: the caller's, minus any ISA setting, plus the config's."""
    env = {k: v for k, v in os.environ.items() if k not in ISA_VARS}
    env.update(CONFIGS[config])
    env.update(
        DLM_HOME=str(home),
        DLM_MODELS_DIR=os.environ.get("DLM_MODELS_DIR", str(models)),
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        PYTHONHASHSEED="1",
        OMP_NUM_THREADS=str(threads),
        MKL_NUM_THREADS=str(threads),
    )
    return env


def train_once(doc: Path, env: dict[str, str], steps: int | None) -> dict:
    """One `dlm train` in a fresh process: its JSON, per-step seconds and the locked capability."""
    cmd = [sys.executable, "-m", "dlm", "train", str(doc), "--json"]
    if steps is not None:
        cmd += ["--max-steps", str(steps)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout[proc.stdout.index("{") :])
    store = Path(env["DLM_HOME"]) / "store" / out["dlm_id"]
    with sqlite3.connect(store / "metrics.sqlite") as db:
        cumulative = [
            s for (s,) in db.execute("SELECT seconds FROM steps WHERE run_id = ? ORDER BY step", (out["run_id"],))
        ]
    per_step = [b - a for a, b in zip(cumulative, cumulative[1:], strict=False)]  # leaves out step 1 (warm-up)
    capability = json.loads((store / "dlm.lock").read_text())["cpu_capability"]
    return {
        "adapter_sha256": out["adapter_sha256"],
        "per_step": per_step,
        "capability": capability,
        "loss": out.get("train_loss"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--doc", type=Path, help="document to train (default: one over dlm's own source)")
    parser.add_argument("--steps", type=int, help="training steps per run (default: 8, or the --doc's own)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (OMP_NUM_THREADS)")
    parser.add_argument("--configs", default="native,pinned", help=f"comma-separated, of {','.join(CONFIGS)}")
    args = parser.parse_args()
    configs = [c.strip() for c in args.configs.split(",")]
    unknown = [c for c in configs if c not in CONFIGS]
    if unknown:
        parser.error(f"unknown configs {unknown}; choose from {list(CONFIGS)}")

    with tempfile.TemporaryDirectory(prefix="dlm-cpu-isa-") as tmp:
        tmpdir = Path(tmp)
        doc = args.doc
        steps = args.steps
        if doc is None:
            doc = tmpdir / "source.dlm"
            doc.write_text(SOURCE_DOC.format(src=REPO / "src" / "dlm"))
            steps = steps or 8
        results: dict[str, list[dict]] = {c: [] for c in configs}
        for r in range(args.rounds):
            for config in configs if r % 2 == 0 else list(reversed(configs)):
                env = child_env(config, tmpdir / f"home-{config}-{r}", tmpdir / "models", args.threads)
                res = train_once(doc.resolve(), env, steps)
                print(
                    f"round {r + 1} {config:<10} {res['capability']:<7} "
                    f"{statistics.median(res['per_step']):.3f} s/step  {res['adapter_sha256'][:23]}",
                    flush=True,
                )
                results[config].append(res)

    cpu = (
        next(
            (
                ln.split(":", 1)[1].strip()
                for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")
            ),
            platform.machine(),
        )
        if Path("/proc/cpuinfo").exists()
        else ""
    )
    print(
        f"\n{cpu}; {args.threads} torch thread(s); document {doc.name if args.doc else 'dlm source'}; "
        f"{args.rounds} round(s); load {os.getloadavg()[0]:.2f}"
    )
    print("| config | torch capability | s/step (median) | steps timed | adapter sha256 |")
    print("|---|---|---|---|---|")
    median: dict[str, float] = {}
    for config, runs in results.items():
        times = [t for run in runs for t in run["per_step"]]
        median[config] = statistics.median(times)
        shas = sorted({run["adapter_sha256"] for run in runs})
        caps = sorted({run["capability"] for run in runs})
        print(
            f"| {config} | {'/'.join(caps)} | {median[config]:.3f} | {len(times)} | "
            f"{' / '.join(s[:23] for s in shas)} |"
        )
    if "native" in median and "pinned" in median:
        # each round ran both back to back, so its ratio sees one machine load
        rounds = [
            statistics.median(p["per_step"]) / statistics.median(n["per_step"])
            for p, n in zip(results["pinned"], results["native"], strict=False)
        ]
        print("pinned / native per round: " + ", ".join(f"{r:.3f}x" for r in rounds))
        print(f"pinned / native seconds per step (medians over all rounds): {median['pinned'] / median['native']:.3f}x")


if __name__ == "__main__":
    main()

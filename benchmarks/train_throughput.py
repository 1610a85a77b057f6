"""Loss-carrying tokens per second of `dlm train` next to a bare peft LoRA loop.

Each measurement runs in a fresh process under a wrapper that reports its peak RSS:

- `dlm train DOC --json --max-steps N` on a copy of the document with
  `training.precision` set, in a `DLM_HOME` whose model and tokenized-section cache
  were warmed by one untimed run first. Loss tokens per second are the report's
  `loss_tokens / step_seconds` (tokens whose label is predicted, per second of the
  steps, the probe and held-out measurements between them excluded; an older report
  without `step_seconds` divides by `train_seconds`); wall is the
  whole command (start, tokenization from the warm cache, held-out scoring, save);
- the bare loop: SmolLM2-135M with the same LoRA (`training:` defaults: r 8, alpha 16,
  dropout 0.05 on every linear layer), AdamW, forward + backward + step on full `batch x sequence_len` blocks of
  real text (every token but each block's first carries loss), under the same ISA pin;
  bf16 is torch's CPU (or CUDA) autocast with the attention `dlm train` runs (torch's
  bfloat16 CPU attention needs AVX512 and fails under the AVX2 pin). Both sides time
  every step, the first included (`dlm train`'s `step_seconds` has no untimed warm-up).

On CUDA both sides also report the peak GPU memory torch allocated during the steps
(`torch.cuda.max_memory_allocated`; the report's `accelerator_peak_bytes`).

Pairs run interleaved (dlm, bare, bare, dlm, ...) so drift on a shared machine hits
both sides. With `--baseline REF`, an older commit's `dlm train` (a detached git worktree
with its own C lister built, on the same interpreter and packages) runs the same
document interleaved with today's, in each of `--precisions` when it has
`training.precision` (else in fp32, its only CPU mode), and the ratios of loss tokens/s,
wall and peak RSS are printed, each precision against the baseline's own; both sides then train the same LoRA targets (`q/k/v/o`, the older
default) with the held-out judge off, so the work compared is the same. An older
report without `loss_tokens` counts them as `train_tokens x real_token_fraction`. Documents: the demo (examples/stdlib.dlm, `sequence_len` 128) and a
long-row document (the `json` and `email` packages of the standard library as
sources, `sequence_len` 512, batch 4) and `defaults`, the same sources with every
training setting at its default (`sequence_len` 2048, batch 4).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/train_throughput.py [--steps 10] [--rounds 1]
        [--precisions fp32,bf16] [--docs demo,long] [--baseline 6ff5e0c]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LONG_DOC = """---
dlm_id: 01JDBENCH0000000000000SEQ5
dlm_version: 1
base_model: smollm2-135m
training:
  sequence_len: 512
  batch_size: 4
  seed: 42
  sources:
    - path: {stdlib}/json
      include: ["**/*.py"]
    - path: {stdlib}/email
      include: ["**/*.py"]
---

# json and email

The standard library's json and email packages.
"""


def at_defaults(text: str) -> str:
    """The long-row document with `sequence_len`, `batch_size` and `seed` left to their defaults."""
    for line in ("  sequence_len: 512\n", "  batch_size: 4\n", "  seed: 42\n"):
        text = text.replace(line, "", 1)
    return text.replace("01JDBENCH0000000000000SEQ5", "01JDBENCH0000000000000DEF5", 1)


def with_precision(text: str, precision: str) -> str:
    """The document with `training.precision` set (inserted first under `training:`)."""
    return text.replace("\ntraining:\n", f"\ntraining:\n  precision: {precision}\n", 1)


def measured(cmd: list[str], env: dict[str, str]) -> dict:
    """Run `cmd` under `--measure` (a child that reports the peak RSS of its own child)."""
    proc = subprocess.run([sys.executable, __file__, "--measure", "--", *cmd], env=env, capture_output=True, text=True)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure_child(cmd: list[str]) -> None:
    """Run `cmd` (its only child, so RUSAGE_CHILDREN is its peak) and print one JSON line."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate()
    wall = time.perf_counter() - t0
    import resource

    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if proc.returncode:
        sys.stderr.write(err[-4000:])
        raise SystemExit(proc.returncode)
    print(json.dumps({"stdout": out, "wall": wall, "rss": rss}))


def bare_loop(precision: str, sequence_len: int, batch: int, steps: int) -> None:
    """The bare peft LoRA loop (module docstring); prints one JSON line."""
    import numpy as np
    import torch
    from peft import LoraConfig, get_peft_model

    from dlm.doc.schema import TrainingConfig
    from dlm.models import load_model, load_tokenizer, resolve_base_model
    from dlm.train.attention import use_dlm_attention

    ref = resolve_base_model("smollm2-135m")
    tokenizer = load_tokenizer(ref)
    text = "".join(
        p.read_text(errors="replace") for p in sorted(Path(sysconfig.get_paths()["stdlib"], "json").glob("*.py"))
    )
    ids = np.asarray(tokenizer(text)["input_ids"], dtype=np.int64)
    need = (steps + 1) * batch * sequence_len
    ids = np.resize(ids, need).reshape(steps + 1, batch, sequence_len)
    torch.manual_seed(42)
    defaults = TrainingConfig()  # the LoRA `dlm train` gives a document that sets none
    model = get_peft_model(
        load_model(ref),
        LoraConfig(
            r=defaults.lora_r,
            lora_alpha=defaults.lora_alpha,
            lora_dropout=defaults.lora_dropout,
            task_type="CAUSAL_LM",
            target_modules=sorted(defaults.target_modules),
        ),
    )
    model.config.use_cache = False
    model.train()
    optim = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=2e-4)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model.to(device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    if precision == "bf16":
        # torch's bfloat16 CPU attention kernels need AVX512 and stop under the AVX2 pin;
        # this is the attention `dlm train` runs (float32 below 512 tokens on a CPU)
        use_dlm_attention(model)
    times = []
    for step in range(steps):  # every step timed, the first included, as dlm train's step_seconds
        batch_ids = torch.from_numpy(ids[step]).to(device)
        t0 = time.perf_counter()
        with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(input_ids=batch_ids, labels=batch_ids).loss
        loss.backward()
        optim.step()
        optim.zero_grad(set_to_none=True)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    seconds = sum(times)
    print(
        json.dumps(
            {
                "loss_tokens_per_s": steps * batch * (sequence_len - 1) / seconds,
                "loss": float(loss),
                "seconds": seconds,
                "gpu_peak": torch.cuda.max_memory_allocated() if device == "cuda" else None,
            }
        )
    )


def gigabytes(n: int | None) -> str:
    """`n` bytes in GB with two decimals, or `-` when there is no figure (off CUDA)."""
    return "-" if n is None else f"{n / 1e9:.2f}"


def same_work(text: str) -> str:
    """The document with the LoRA targets both versions compare on (the older default)."""
    return text.replace("\ntraining:\n", "\ntraining:\n  target_modules: [q_proj, k_proj, v_proj, o_proj]\n", 1)


def without_judge(text: str) -> str:
    """The document with `training.eval.judge: false` (an older dlm has no judge to skip)."""
    if "\n  eval:\n" in text:
        return text.replace("\n  eval:\n", "\n  eval:\n    judge: false\n", 1)
    return text.replace("\ntraining:\n", "\ntraining:\n  eval:\n    judge: false\n", 1)


def knows_precision(ref: str) -> bool:
    """Whether commit `ref`'s document schema has `training.precision` (and the judge)."""
    schema = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{ref}:src/dlm/doc/schema.py"], capture_output=True, text=True
    ).stdout
    return "precision:" in schema and "judge" in schema


def baseline_tree(ref: str, tmp: Path) -> Path:
    """A detached worktree of `ref` under `tmp` with its C lister built in place."""
    tree = tmp / "baseline"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), ref], check=True)
    from setuptools import Distribution, Extension

    ext = Extension("dlm.rows._fastlist", [str(tree / "src/dlm/rows/_fastlist.c")])
    dist = Distribution({"ext_modules": [ext], "package_dir": {"": str(tree / "src")}})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace, cmd.build_lib, cmd.build_temp = 0, str(tree / "src"), str(tmp / "build")
    dist.run_command("build_ext")
    return tree


def dlm_run(doc: Path, env: dict[str, str], steps: int) -> dict:
    got = measured([sys.executable, "-m", "dlm", "train", str(doc), "--json", "--max-steps", str(steps)], env)
    report = json.loads(got["stdout"])
    loss_tokens = report.get("loss_tokens") or report["train_tokens"] * (report.get("real_token_fraction") or 1.0)
    return {
        # the steps alone where the report says (measurements between steps are not training)
        "loss_tokens_per_s": loss_tokens / (report.get("step_seconds") or report["train_seconds"]),
        "wall": got["wall"],
        "rss": got["rss"],
        "real_fraction": report["real_token_fraction"],
        "train_loss": report["train_loss"],
        "heldout_after": ((report.get("heldout") or {}).get("after") or {}).get("loss", float("nan")),
        "gpu_peak": report.get("accelerator_peak_bytes"),
    }


def bare_run(precision: str, sequence_len: int, batch: int, steps: int, env: dict[str, str]) -> dict:
    got = measured([sys.executable, __file__, "--bare", precision, str(sequence_len), str(batch), str(steps)], env)
    out = json.loads(got["stdout"].strip().splitlines()[-1])
    return {**out, "wall": got["wall"], "rss": got["rss"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--docs", default="demo,long")
    parser.add_argument(
        "--homes", type=Path, default=None, help="keep each document's DLM_HOME under this folder; a warm one is reused"
    )
    parser.add_argument("--baseline", help="an older commit whose dlm train runs beside today's (fp32, same work)")
    args = parser.parse_args()
    path = os.pathsep.join(p for p in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": path}
    if args.baseline:
        compare_baseline(args, env)
        return
    stdlib = sysconfig.get_paths()["stdlib"]
    docs = {
        "demo": ((REPO / "examples/stdlib.dlm").read_text(), 128, 2),  # its micro-batch: 2 x 2 accumulated
        "long": (LONG_DOC.format(stdlib=stdlib), 512, 4),
        "defaults": (at_defaults(LONG_DOC.format(stdlib=stdlib)), 2048, 4),
    }
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(
        "| document | precision | dlm loss tok/s | bare tok/s | dlm / bare | dlm wall s | dlm peak RSS GB "
        "| real-token fraction | train loss | held-out after | dlm / bare GPU peak GB |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory(prefix="dlm-bench-") as tmp:
        for name in args.docs.split(","):
            text, sequence_len, batch = docs[name]
            home = Path(args.homes or tmp, f"home-{name}")
            warmed = home.exists()
            run_env = {**env, "DLM_HOME": str(home)}
            for precision in args.precisions.split(","):
                doc = Path(tmp, f"{name}-{precision}.dlm")
                doc.write_text(with_precision(text, precision))
            warm = Path(tmp, f"{name}-{args.precisions.split(',')[0]}.dlm")
            if not warmed:
                dlm_run(warm, run_env, 1)  # model on disk, cache warm: not timed
            for precision in args.precisions.split(","):
                doc = Path(tmp, f"{name}-{precision}.dlm")
                dlm_side, bare_side = [], []
                for r in range(args.rounds):
                    for side in ("dlm", "bare") if r % 2 == 0 else ("bare", "dlm"):  # interleaved, each first in turn
                        if side == "dlm":
                            dlm_side.append(dlm_run(doc, run_env, args.steps))
                        else:
                            bare_side.append(bare_run(precision, sequence_len, batch, args.steps, env))
                d = {k: statistics.median(x[k] for x in dlm_side) for k in ("loss_tokens_per_s", "wall", "rss")}
                b = statistics.median(x["loss_tokens_per_s"] for x in bare_side)
                results[(name, precision)] = d
                last = dlm_side[-1]
                print(
                    f"| {name} | {precision} | {d['loss_tokens_per_s']:.0f} | {b:.0f} | "
                    f"{d['loss_tokens_per_s'] / b:.2f}x | {d['wall']:.1f} | {d['rss'] / 1e9:.2f} | "
                    f"{last['real_fraction']:.3f} | {last['train_loss']:.3f} | {last['heldout_after']:.3f} | "
                    f"{gigabytes(last['gpu_peak'])} / {gigabytes(bare_side[-1]['gpu_peak'])} |",
                    flush=True,
                )
    for name in args.docs.split(","):
        if (name, "fp32") in results and (name, "bf16") in results:
            ratio = results[(name, "bf16")]["loss_tokens_per_s"] / results[(name, "fp32")]["loss_tokens_per_s"]
            print(f"{name}: bf16 / fp32 loss tokens per second {ratio:.2f}x")


def compare_baseline(args: argparse.Namespace, env: dict[str, str]) -> None:
    """Today's `dlm train` (in each of `args.precisions`) and `args.baseline`'s (fp32, its
    only CPU mode) on the same documents, interleaved."""
    stdlib = sysconfig.get_paths()["stdlib"]
    demo = subprocess.run(
        ["git", "-C", str(REPO), "show", f"{args.baseline}:examples/stdlib.dlm"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    long = LONG_DOC.format(stdlib=stdlib)
    docs = {"demo": demo, "long": long, "defaults": at_defaults(long)}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"today ({REPO.name} working tree) against {args.baseline}, q/k/v/o, {args.steps} steps, no judge")
    print("| document | side | loss tok/s | wall s | peak RSS GB | real-token fraction |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="dlm-bench-") as folder:
        tmp = Path(folder)
        tree = baseline_tree(args.baseline, tmp)
        try:
            precisions = args.precisions.split(",")
            today = [f"today-{p}" for p in precisions]
            # a baseline that knows `training.precision` runs each precision too (its `auto`
            # would pick bf16 where the CPU has it); an older one runs fp32, its only CPU mode
            paired = knows_precision(args.baseline)
            baselines = [f"baseline-{p}" for p in precisions] if paired else ["baseline"]
            sides = {side: {**env} for side in today}
            sides.update({side: {**env, "PYTHONPATH": str(tree / "src")} for side in baselines})
            for name in args.docs.split(","):
                text = same_work(docs[name])
                for side in [*today, *(baselines if paired else [])]:
                    (tmp / f"{name}-{side}.dlm").write_text(without_judge(with_precision(text, side.rsplit("-", 1)[1])))
                if not paired:
                    (tmp / f"{name}-baseline.dlm").write_text(text)
                got: dict[str, list[dict]] = {side: [] for side in sides}
                for side, side_env in sides.items():  # model on disk, cache warm: not timed
                    side_env["DLM_HOME"] = str(tmp / f"home-{name}-{side}")
                    dlm_run(tmp / f"{name}-{side}.dlm", side_env, 1)
                order = list(sides)
                for r in range(args.rounds):
                    for side in order if r % 2 == 0 else order[::-1]:
                        got[side].append(dlm_run(tmp / f"{name}-{side}.dlm", sides[side], args.steps))
                med = {
                    side: {k: statistics.median(x[k] for x in runs) for k in ("loss_tokens_per_s", "wall", "rss")}
                    for side, runs in got.items()
                }
                for side in [*baselines, *today]:
                    m = med[side]
                    print(
                        f"| {name} | {side} | {m['loss_tokens_per_s']:.0f} | {m['wall']:.1f} | {m['rss'] / 1e9:.2f} "
                        f"| {got[side][-1]['real_fraction'] or 0:.3f} |",
                        flush=True,
                    )
                for side in today:
                    base = f"baseline-{side.rsplit('-', 1)[1]}" if paired else "baseline"
                    b, t = med[base], med[side]
                    print(
                        f"{name}: {side} / {base}: loss tokens/s "
                        f"{t['loss_tokens_per_s'] / b['loss_tokens_per_s']:.2f}x, "
                        f"wall {t['wall'] / b['wall']:.2f}x, peak RSS {t['rss'] / b['rss']:.2f}x",
                        flush=True,
                    )
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)], check=False)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--measure"]:
        measure_child(sys.argv[3:])
    elif sys.argv[1:2] == ["--bare"]:
        bare_loop(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        main()

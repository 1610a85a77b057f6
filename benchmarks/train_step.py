"""Seconds per LoRA training step and peak memory, by how the loss meets the LM head.

Three trainers train the embedded SmolLM2-135M with the same LoRA settings on the same
seeded batches, each run in a fresh process (so its peak RSS is its own), in alternating
order:

- `model-loss`: the model's own cross-entropy over full `[B, T, V]` logits;
- `trl-chunked`: TRL's SFTTrainer as it comes (its chunked LM-head loss);
- `dlm-fused`: `dlm.train.lora.fused_loss_trainer`, what `dlm train` runs
  (`dlm.train.lm_loss`).

It prints the median seconds per step (the first step of a run is warm-up), peak RSS
and the first-step loss of each (which must agree: all compute the same cross-entropy),
and each one's step-time and peak-RSS ratio to `model-loss`.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/train_step.py [--steps 4] [--rounds 2]
        [--batch-size 4] [--sequence-len 128] [--precision float32|bfloat16]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from dlm.models import load_model, load_tokenizer, resolve_base_model
from dlm.tokenize.seam import TokenizedRows
from dlm.train.dataset import WindowDataset, as_hf_dataset
from dlm.train.lora import Hyperparameters, fused_loss_trainer, train_lora


class StepTimes:
    def __init__(self) -> None:
        self.times: list[float] = []
        self.losses: list[float] = []

    def on_train_start(self, total_steps: int) -> None:
        self.t0 = time.perf_counter()

    def on_step(self, step, loss, *rest) -> None:  # noqa: ANN001
        now = time.perf_counter()
        self.times.append(now - self.t0)
        self.t0 = now
        self.losses.append(loss)


def synthetic_rows(n: int, seq: int) -> TokenizedRows:
    data = [np.random.default_rng(i).integers(3, 40000, seq).astype(np.uint16) for i in range(n)]
    return TokenizedRows(
        lengths=np.full(n, seq),
        n_prompt=np.zeros(n, np.int32),
        keys=[""] * n,
        read=lambda i: data[i],
        kinds=["prose"] * n,
    )


def model_loss_trainer() -> type:
    from transformers import Trainer
    from trl import SFTTrainer

    class ModelLossSFTTrainer(SFTTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):  # noqa: ANN001
            return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)

    return ModelLossSFTTrainer


def trainer_for(name: str) -> type:
    from trl import SFTTrainer

    return {"model-loss": model_loss_trainer, "trl-chunked": lambda: SFTTrainer, "dlm-fused": fused_loss_trainer}[
        name
    ]()


VARIANTS = ("model-loss", "trl-chunked", "dlm-fused")


def run_one(name: str, args: argparse.Namespace) -> None:
    """Train `name` once in this process and print one JSON line."""
    ref = resolve_base_model("smollm2-135m")
    tokenizer = load_tokenizer(ref)
    rows = synthetic_rows(args.steps * args.batch_size, args.sequence_len)
    run = Hyperparameters(
        8,
        16,
        0.0,
        ("k_proj", "o_proj", "q_proj", "v_proj"),
        2e-4,
        args.steps,
        1.0,
        args.batch_size,
        1,
        42,
        precision=args.precision,
        gradient_checkpointing=False,
    )
    times = StepTimes()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        train_lora(
            load_model(ref),
            tokenizer,
            as_hf_dataset(WindowDataset(rows, args.sequence_len)),
            run,
            Path(tmp),
            times,
            trainer_cls=trainer_for(name),
        )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"times": times.times[1:], "loss": times.losses[0], "rss": rss}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--sequence-len", type=int, default=128)
    parser.add_argument("--precision", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # one run, in a child
    args = parser.parse_args()
    if args.variant:
        run_one(args.variant, args)
        return
    got: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for round_ in range(args.rounds):
        for name in VARIANTS if round_ % 2 == 0 else VARIANTS[::-1]:
            cmd = [sys.executable, __file__, "--variant", name, "--steps", str(args.steps)]
            cmd += ["--batch-size", str(args.batch_size), "--sequence-len", str(args.sequence_len)]
            cmd += ["--precision", args.precision]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            got[name].append(json.loads(out.strip().splitlines()[-1]))
    per_step = {name: statistics.median(t for r in runs for t in r["times"]) for name, runs in got.items()}
    rss = {name: statistics.median(r["rss"] for r in runs) for name, runs in got.items()}
    print(f"torch threads {torch.get_num_threads()}, batch {args.batch_size} x {args.sequence_len}, {args.precision}")
    print(
        "| trainer | s/step (median) | peak RSS GB | first-step loss | step time / model-loss | peak RSS / model-loss |"
    )
    print("|---|---|---|---|---|---|")
    for name, runs in got.items():
        print(
            f"| {name} | {per_step[name]:.2f} | {rss[name] / 1e9:.2f} | {runs[0]['loss']:.6f} "
            f"| {per_step[name] / per_step['model-loss']:.2f}x | {rss[name] / rss['model-loss']:.2f}x |"
        )


if __name__ == "__main__":
    main()

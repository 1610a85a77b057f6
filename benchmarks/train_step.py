"""Seconds per LoRA training step: TRL's fused-LM-head loss vs the model's own loss.

Both trainers train the embedded SmolLM2-135M with the same LoRA settings on the same
seeded batches, in alternating order, in one process; the script prints seconds per
step for each, their ratio, and the first-step losses (which must agree: the two
compute the same cross-entropy).

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/train_step.py [--steps 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from dlm.models import load_model, load_tokenizer, resolve_base_model
from dlm.tokenize.seam import TokenizedRows
from dlm.train.dataset import WindowDataset, as_hf_dataset
from dlm.train.lora import Hyperparameters, native_loss_trainer, train_lora


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--sequence-len", type=int, default=128)
    args = parser.parse_args()
    from trl import SFTTrainer

    ref = resolve_base_model("smollm2-135m")
    tokenizer = load_tokenizer(ref)
    rows = synthetic_rows(args.steps * args.batch_size, args.sequence_len)
    run = Hyperparameters(
        8, 16, 0.0, ("k_proj", "o_proj", "q_proj", "v_proj"), 2e-4, args.steps, 1.0, args.batch_size, 1, 42
    )
    variants = {"trl-fused-head": SFTTrainer, "native-loss": native_loss_trainer()}
    results: dict[str, StepTimes] = {name: StepTimes() for name in variants}
    for round_ in range(args.rounds):
        order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
        for name in order:
            torch.manual_seed(0)
            with tempfile.TemporaryDirectory() as tmp:
                train_lora(
                    load_model(ref),
                    tokenizer,
                    as_hf_dataset(WindowDataset(rows, args.sequence_len)),
                    run,
                    Path(tmp),
                    results[name],
                    trainer_cls=variants[name],
                )
    # the first step of each run includes warm-up; report the median of the rest
    per_step = {
        name: statistics.median(t for i, t in enumerate(r.times) if i % args.steps) for name, r in results.items()
    }
    print(f"torch threads {torch.get_num_threads()}, batch {args.batch_size} x {args.sequence_len}")
    print("| trainer | s/step (median) | first-step loss |")
    print("|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {per_step[name]:.2f} | {r.losses[0]:.6f} |")
    print(f"native-loss speedup: {per_step['trl-fused-head'] / per_step['native-loss']:.2f}x")


if __name__ == "__main__":
    main()

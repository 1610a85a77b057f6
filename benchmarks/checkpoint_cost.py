"""What a checkpoint costs: seconds to write one (the Trainer's save plus the atomic
publication) beside the seconds of a training step, and its bytes, with the demo's
settings (`examples/stdlib.dlm`: SmolLM2-135M, LoRA r=8 on every linear layer, 4 x 128
tokens a micro-batch), checkpointing after every step.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/checkpoint_cost.py [--steps 3]

Prints per step: compute seconds, checkpoint seconds, their ratio, and what the default
interval (`checkpoint_every: 5m`) makes of it: checkpoint seconds / 300.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from transformers import TrainerCallback

from dlm.doc.budget import Every
from dlm.doc.schema import ALL_LINEAR
from dlm.models import load_model, load_tokenizer, resolve_base_model
from dlm.tokenize.seam import TokenizedRows
from dlm.train.checkpoint import saver_callback
from dlm.train.dataset import WindowDataset, as_hf_dataset
from dlm.train.lora import Hyperparameters, train_lora


class Clock(TrainerCallback):
    def __init__(self) -> None:
        self.compute: list[float] = []
        self.saving: list[float] = []

    def on_step_begin(self, args, state, control, **kwargs):  # noqa: ANN001
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        self.t1 = time.perf_counter()
        self.compute.append(self.t1 - self.t0)

    def on_save(self, args, state, control, **kwargs):  # noqa: ANN001
        self.saving.append(time.perf_counter() - self.t1)


class Quiet:
    def on_train_start(self, total_steps: int) -> None:
        pass

    def on_step(self, *args) -> None:  # noqa: ANN002
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    ref = resolve_base_model("smollm2-135m")
    tokenizer = load_tokenizer(ref)
    data = [np.random.default_rng(i).integers(3, 40000, 128).astype(np.uint16) for i in range(64)]
    rows = TokenizedRows(
        lengths=np.full(64, 128),
        n_prompt=np.zeros(64, np.int32),
        keys=[""] * 64,
        read=lambda i: data[i],
        kinds=["prose"] * 64,
    )
    dataset = WindowDataset(rows, 128)
    run = Hyperparameters(
        lora_r=8,
        lora_alpha=16,
        lora_dropout=0.05,
        target_modules=ALL_LINEAR,
        learning_rate=1e-3,
        max_steps=args.steps + 1,
        num_epochs=1.0,
        batch_size=4,
        gradient_accumulation_steps=1,
        seed=42,
    )
    clock = Clock()
    sizes: list[int] = []
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "checkpoints"

        def saved(step: int, path: Path) -> None:
            sizes.append(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()))

        # the clock's on_save runs after the saver's, so it includes the publication
        saver = saver_callback(Every(steps=1), folder, saved)
        train_lora(
            load_model(ref),
            tokenizer,
            as_hf_dataset(dataset),
            run,
            Path(scratch) / "trainer",
            Quiet(),
            callbacks=[saver, clock],
            sequence_len=128,
        )
    step, save = statistics.median(clock.compute[1:]), statistics.median(clock.saving)
    print(f"steps timed: {len(clock.compute) - 1} (after the first), checkpoints: {len(clock.saving)}")
    print(f"compute per step   {step:8.2f} s")
    print(f"one checkpoint     {save:8.2f} s   ({sizes[-1] / 2**20:.1f} MiB)")
    print(f"checkpoint / step  {save / step:8.2f} x")
    print(f"at the 5m default  {save / 300:8.2%} of training time")


if __name__ == "__main__":
    main()

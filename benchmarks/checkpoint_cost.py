"""What a checkpoint costs: seconds to write and publish one beside the seconds of a
training step, and its bytes, with the demo's settings (`examples/stdlib.dlm`:
SmolLM2-135M, LoRA r=8 on every linear layer, 4 x 128 tokens a micro-batch),
checkpointing after every step of `dlm.train.loop.train`.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/checkpoint_cost.py [--steps 3]

Prints: compute seconds per step, checkpoint seconds, their ratio, and what the default
interval (`checkpoint_every: 5m`) makes of it: checkpoint seconds / 300.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np

from dlm.doc.budget import Every
from dlm.doc.schema import ALL_LINEAR
from dlm.models import load_model, resolve_base_model
from dlm.tokenize.seam import TokenizedRows
from dlm.train.dataset import WindowDataset
from dlm.train.loop import LoopRun, train
from dlm.train.lora import Hyperparameters


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
    data = [np.random.default_rng(i).integers(3, 40000, 128).astype(np.uint16) for i in range(64)]
    rows = TokenizedRows(
        lengths=np.full(64, 128),
        n_prompt=np.zeros(64, np.int32),
        keys=[""] * 64,
        read=lambda i: data[i],
        kinds=["prose"] * 64,
    )
    hyper = Hyperparameters(
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
    sizes: list[int] = []
    runs = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, every in (("without", None), ("with", Every(steps=1))):

            def saved(step: int, path: Path) -> None:
                sizes.append(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()))

            folder = Path(scratch) / name / "checkpoints"
            run = LoopRun(
                hyper,
                WindowDataset(rows, 128),
                np.zeros(64, np.int64),
                128,
                0,
                checkpoints=folder,
                every=every,
                on_checkpoint=saved,
            )
            runs[name] = train(load_model(ref), run, Quiet())
    step = runs["without"].step_seconds / runs["without"].steps
    save = runs["with"].hook_seconds / max(len(sizes), 1)
    print(f"steps: {runs['with'].steps}, checkpoints: {len(sizes)} (every step but the last)")
    print(f"compute per step   {step:8.2f} s")
    print(f"one checkpoint     {save:8.2f} s   ({sizes[-1] / 2**20:.1f} MiB)")
    print(f"checkpoint / step  {save / step:8.2f} x")
    print(f"at the 5m default  {save / 300:8.2%} of training time")


if __name__ == "__main__":
    main()

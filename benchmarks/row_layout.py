"""One row per micro-batch (the shared prefix once) against one example per row, side by side.

For each document the run's examples and micro-batches are built as `dlm train` builds
them (`padding.prepared`: `dlm.actions.training.plan.prepare` in a temporary
`DLM_HOME`, one rank). Every micro-batch of the run is laid out both ways, without a
model: `rows` is `dlm.train.data.collate` (one example per row, padded to the longest),
`row` is `dlm.train.shared_prefix.micro_batch` (what the loop trains: one row, the
examples' shared prefix once, or one example per row where the row would pass
`sequence_len`). The table gives, per layout, the processed tokens (padding included),
the padding share and the loss-carrying share.

Then the first `--steps` micro-batches train in both layouts on SmolLM2-135M with the
run's LoRA (`prepare_model`, the run's hyperparameters), interleaved micro-batch by
micro-batch (rows, row, row, rows, ...) in one process so drift hits both: forward
(with the replay KL's base pass where the run has `replay_loss: kl`), backward and an
AdamW step, each timed; the first micro-batch of each layout is an untimed warm-up.
Prints seconds per micro-batch for each layout and their ratio, for each precision in
`--precisions` (bf16 only where the CPU has bfloat16 instructions).

    PYTHONPATH=src python benchmarks/row_layout.py [DOC.dlm ...] [--steps 24] [--precisions fp32,bf16]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from padding import prepared  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DOCS = sorted((ROOT / "benchmarks" / "learning").glob("*/*.dlm"))


def layouts(run: Any) -> tuple[list[np.ndarray], Any]:
    """Every micro-batch of the run in training order, and the collate arguments."""
    from dlm.train.data import Schedule, epoch_steps

    hyper, dataset = run.hyper, run.dataset
    steps = hyper.max_steps or epoch_steps(len(dataset), hyper.batch_size, 1, hyper.num_epochs)
    schedule = Schedule(
        dataset.lengths,
        dataset.loss_tokens,
        hyper.batch_size,
        hyper.gradient_accumulation_steps,
        1,
        hyper.seed,
        run.sequence_len,
        dataset.originals,
    )
    count = steps * hyper.gradient_accumulation_steps
    return [schedule.micro_batch_at(j) for j in range(count)], schedule


def batch_of(run: Any, examples: np.ndarray, one_row: bool) -> Any:
    from dlm.train.data import collate
    from dlm.train.shared_prefix import micro_batch

    make = micro_batch if one_row else collate
    items = [run.dataset[int(j)] for j in examples]
    kinds = [run.dataset.token_kinds(int(j), run.row_kinds) for j in examples]
    return make(items, run.pad_id, run.sequence_len, kinds)


def shares(run: Any, batches: list[np.ndarray], one_row: bool) -> tuple[int, float, float, int]:
    """(processed tokens, padding share, loss-carrying share, micro-batches laid out as one row)."""
    processed = real = loss = rows = 0
    for examples in batches:
        b = batch_of(run, examples, one_row)
        processed, real = processed + b.processed, real + b.tokens
        loss += int(b.inputs["loss_rows"].shape[0])
        rows += b.segments is not None
    return processed, 1 - real / processed, loss / processed, rows


def timed(run: Any, base: Any, batches: list[np.ndarray], precision: str) -> dict[str, float]:
    """Seconds per micro-batch of each layout, interleaved (module docstring)."""
    import torch

    from dlm.models import load_model
    from dlm.train.model import ModelPlan, prepare_model
    from dlm.train.replay_kl import replay_inputs

    hyper = replace(run.hyper, precision=precision)
    model = prepare_model(load_model(base), ModelPlan(hyper))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=hyper.learning_rate, weight_decay=0.0)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16")
    seconds = {"rows": 0.0, "row": 0.0}
    for i, examples in enumerate(batches):
        order = ["rows", "row"] if i % 2 == 0 else ["row", "rows"]
        for name in order:
            b = batch_of(run, examples, name == "row")
            inputs = replay_inputs(b) if hyper.replay_loss == "kl" else b.inputs
            model.clock.tick()
            start = time.perf_counter()
            with autocast:
                loss = model(**inputs).sum() / max(int(b.inputs["loss_rows"].shape[0]), 1)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if i > 0:
                seconds[name] += time.perf_counter() - start
    return {k: v / max(len(batches) - 1, 1) for k, v in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", nargs="*", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--steps", type=int, default=24, help="micro-batches timed per layout (0: none)")
    parser.add_argument("--precisions", default="fp32,bf16")
    args = parser.parse_args()
    from dlm.actions.training.publish import loop_run
    from dlm.cpu_isa import read_cpu_flags
    from dlm.paths import models_dir
    from dlm.train.precision import cpu_bf16_flags

    os.environ["DLM_MODELS_DIR"] = str(models_dir())
    bf16 = bool(cpu_bf16_flags(read_cpu_flags()))
    precisions = [p for p in args.precisions.split(",") if p == "fp32" or bf16]
    print(f"machine: {os.cpu_count()} cores; timed: {', '.join(precisions) or 'none'}")
    print("| doc | micro-batches | as one row | processed rows -> row | padding rows -> row | loss share rows -> row |")
    print("|---|---|---|---|---|---|")
    timings = []
    with tempfile.TemporaryDirectory(prefix="dlm-row-layout-") as home:
        os.environ["DLM_HOME"] = home
        for path in args.docs:
            ready = prepared(path, None)
            run = loop_run(ready, None, None)
            batches, _ = layouts(run)
            (pr, pad_r, loss_r, _), (p1, pad_1, loss_1, rows) = (shares(run, batches, x) for x in (False, True))
            print(
                f"| {path.stem} | {len(batches)} | {rows} | {pr:,} -> {p1:,} ({p1 / pr:.2f}x) | "
                f"{pad_r:.1%} -> {pad_1:.1%} | {loss_r:.1%} -> {loss_1:.1%} |",
                flush=True,
            )
            if args.steps:
                timings.append((path.stem, run, ready.ref, batches[: args.steps + 1]))
        if not timings:
            return
        print("\n| doc | precision | s per micro-batch, one example per row | one row | row / rows |")
        print("|---|---|---|---|---|")
        for name, run, base, batches in timings:
            for precision in precisions:
                s = timed(run, base, batches, {"fp32": "float32", "bf16": "bfloat16"}[precision])
                ratio = s["row"] / s["rows"]
                print(f"| {name} | {precision} | {s['rows']:.3f} | {s['row']:.3f} | {ratio:.2f}x |", flush=True)


if __name__ == "__main__":
    main()

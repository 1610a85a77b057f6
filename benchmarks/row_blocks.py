"""Attention by blocks in one row (`dlm.train.row_blocks`) against the row's masked attention,
side by side.

Two parts, both on this machine's CPU, in one process, the two ways interleaved so drift
hits both:

1. `kernel`: one layer's attention of SmolLM2-135M's shape (9 query heads over 3
   key/value heads of 64), forward and backward, for rows of a prefix and several tails:
   torch's kernel under the row's mask (`row_mask`) against `blocked_attention`. Prints
   milliseconds a call and the ratio; where the ratio passes 1 is what `BLOCKS_FROM` and
   `blocks_pay` follow.
2. `train`: the first `--steps` micro-batches of each document's run (`padding.prepared`:
   built as `dlm train` builds them) trained on SmolLM2-135M with the run's LoRA, each
   micro-batch once with its blocks and once without (its mask alone), alternating which
   goes first: forward (with the replay KL's base pass), backward and an AdamW step. The
   first micro-batch is an untimed warm-up. Prints seconds a micro-batch and the ratio,
   per precision in `--precisions` (bf16 only where the CPU has bfloat16 instructions).

    PYTHONPATH=src python benchmarks/row_blocks.py [DOC.dlm ...] [--steps 16] [--precisions fp32,bf16] [--skip-kernel]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from padding import prepared  # noqa: E402
from row_layout import DEFAULT_DOCS, batch_of, layouts  # noqa: E402

# (prefix, tail lengths) of the kernel table: SmolLM2's system turn is about 20 tokens
SHAPES = [
    (20, [20, 20]),
    (20, [40, 40]),
    (20, [20] * 4),
    (20, [30] * 4),
    (20, [40] * 4),
    (20, [60] * 4),
    (20, [100] * 4),
    (20, [150] * 4),
    (20, [40] * 8),
    (20, [100, 100]),
    (20, [300, 100]),
]


def kernel(rounds: int = 30) -> None:
    """Part 1 of the module docstring."""
    import numpy as np
    import torch

    from dlm.train.data import padded_length
    from dlm.train.row_blocks import blocked_attention
    from dlm.train.shared_prefix import row_mask

    sdpa = torch.nn.functional.scaled_dot_product_attention
    print("| prefix + tails | row width | masked ms | blocked ms | blocked / masked |")
    print("|---|---|---|---|---|")
    for prefix, tails in SHAPES:
        n = padded_length(prefix + sum(tails), None)
        parts = [np.zeros(prefix, np.int64)] + [np.full(t, k + 1) for k, t in enumerate(tails)]
        segments = np.concatenate(parts + [np.full(n - prefix - sum(tails), -1)])
        mask = row_mask(segments)
        blocks = row_blocks_forced(segments)
        g = torch.Generator().manual_seed(0)
        qkv = [[torch.randn((1, h, n, 64), generator=g, requires_grad=True) for h in (9, 3, 3)] for _ in range(rounds)]
        ways = {
            "masked": lambda q, k, v, mask=mask: sdpa(q, k, v, attn_mask=mask, enable_gqa=True),
            "blocked": lambda q, k, v, blocks=blocks: blocked_attention(q, k, v, blocks),
        }
        seconds = dict.fromkeys(ways, 0.0)
        for i, (q, k, v) in enumerate(qkv):
            for name in list(ways) if i % 2 == 0 else list(ways)[::-1]:
                start = time.perf_counter()
                ways[name](q, k, v).sum().backward()
                seconds[name] += time.perf_counter() - start
        ms = {k: 1000 * s / rounds for k, s in seconds.items()}
        shape = f"{prefix} + {' + '.join(map(str, tails))}"
        ratio = ms["blocked"] / ms["masked"]
        print(f"| {shape} | {n} | {ms['masked']:.2f} | {ms['blocked']:.2f} | {ratio:.2f}x |", flush=True)


def row_blocks_forced(segments: Any) -> Any:
    """`row_blocks` of `segments` as if blocks paid at every width (the kernel table times
    the rows `blocks_pay` turns down too)."""
    from unittest import mock

    from dlm.train import row_blocks as module

    with mock.patch.object(module, "blocks_pay", lambda *_: True):
        return module.row_blocks(segments)


def timed(run: Any, base: Any, batches: list[Any], precision: str) -> tuple[dict[str, float], int]:
    """Seconds a micro-batch with blocks and without (module docstring), and how many of
    the timed micro-batches had blocks."""
    import torch

    from dlm.models import load_model
    from dlm.train.model import ModelPlan, prepare_model
    from dlm.train.replay_kl import replay_inputs
    from dlm.train.row_blocks import without_blocks

    hyper = replace(run.hyper, precision=precision)
    model = prepare_model(load_model(base), ModelPlan(hyper))
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=hyper.learning_rate, weight_decay=0.0)
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bfloat16")
    seconds, with_blocks = {"blocks": 0.0, "mask": 0.0}, 0
    for i, examples in enumerate(batches):
        b = batch_of(run, examples, True)
        inputs = replay_inputs(b) if hyper.replay_loss == "kl" else b.inputs
        with_blocks += i > 0 and "row_tails" in inputs
        for name in ["blocks", "mask"] if i % 2 == 0 else ["mask", "blocks"]:
            model.clock.tick()
            start = time.perf_counter()
            with autocast:
                given = inputs if name == "blocks" else without_blocks(inputs)
                loss = model(**given).sum() / max(int(b.inputs["loss_rows"].shape[0]), 1)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if i > 0:
                seconds[name] += time.perf_counter() - start
    return {k: v / max(len(batches) - 1, 1) for k, v in seconds.items()}, with_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", nargs="*", type=Path, default=DEFAULT_DOCS)
    parser.add_argument("--steps", type=int, default=16, help="micro-batches timed per document (0: none)")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--skip-kernel", action="store_true", help="leave out part 1")
    args = parser.parse_args()
    from dlm.actions.training.publish import loop_run
    from dlm.cpu_isa import read_cpu_flags
    from dlm.paths import models_dir
    from dlm.train.precision import cpu_bf16_flags

    bf16 = bool(cpu_bf16_flags(read_cpu_flags()))
    precisions = [p for p in args.precisions.split(",") if p == "fp32" or bf16]
    print(f"machine: {os.cpu_count()} cores; torch threads: {_threads()}; trained: {', '.join(precisions) or 'none'}\n")
    if not args.skip_kernel:
        kernel()
    if not args.steps:
        return
    os.environ["DLM_MODELS_DIR"] = str(models_dir())
    print("\n| doc | precision | micro-batches with blocks | s, mask | s, blocks | blocks / mask |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="dlm-row-blocks-") as home:
        os.environ["DLM_HOME"] = home
        for path in args.docs:
            ready = prepared(path, None)
            run = loop_run(ready, None, None)
            batches = layouts(run)[0][: args.steps + 1]
            for precision in precisions:
                s, n = timed(run, ready.ref, batches, {"fp32": "float32", "bf16": "bfloat16"}[precision])
                ratio = s["blocks"] / s["mask"]
                print(
                    f"| {path.stem} | {precision} | {n} of {len(batches) - 1} | {s['mask']:.3f} | "
                    f"{s['blocks']:.3f} | {ratio:.2f}x |",
                    flush=True,
                )


def _threads() -> int:
    import torch

    return torch.get_num_threads()


if __name__ == "__main__":
    main()

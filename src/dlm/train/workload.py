"""What a run will train, step by step, counted before its first step.

**Tokens.** The progress bar's total, the ETA and `dlm train --dry-run` count tokens as
the loop does (`LoopState.tokens`, the report's `train_tokens`): the real tokens of this
rank's micro-batches, each in the layout the loop gives it (`dlm.train.shared_prefix`: a
row of several chat examples holds their shared prefix, the system turn, once). Counting
every example at its own length instead overstates a run of short chat examples by the
prefix of all but one example of each micro-batch, about a fifth of a small document's
tokens, so the bar stopped short of its total and the ETA read half a minute at the
last step.

**Work.** Steps differ in cost per token: a step of replay rows also runs the base model
over them for the KL (`dlm.train.replay_kl`) and is wider, so its attention costs more.
The dry run times a few steps and scales their time by the work of the whole run, in
units of one token through the decoder's linear layers (2 N floating-point operations,
N the decoder's weights without the embedding; the transformer's count of Kaplan et al.
2020, "Scaling Laws for Neural Language Models"), per micro-batch:

- every processed position, forward and backward to its input (LoRA's own weight
  gradients are small): 2;
- every position that carries loss, the LM head's two products: 2 V H / N
  (V the vocabulary, H the hidden size);
- attention's scores and weighted sum, forward and about twice that backward:
  3 * 2 P H L / N, P the (query, key) pairs a layer computes (L layers): n^2 for a row of
  n positions under a mask, which the kernel computes whole, or the pairs of the row's
  blocks where it attends by blocks (`dlm.train.row_blocks.attention_pairs`);
- with KL replay, the base model's pass over the rows or tails holding replay positions
  (forward only): 1 a token, and its head at those positions: V H / N.

`step_tokens` and `step_work` walk the loop's own schedule (`dlm.train.loop.run_schedule`)
and size each micro-batch with `layout_of`, which decides the layout the way
`micro_batch` does without building tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlm.train.dataset import PackedDataset, example_kinds
from dlm.train.loop import LoopRun, run_schedule, run_steps
from dlm.train.row_blocks import attention_pairs
from dlm.train.shared_prefix import Layout, layout_of, rows_layout


def _layouts(run: LoopRun) -> list[list[tuple[Layout, np.ndarray]]]:
    """Per step of `run` on this rank, each micro-batch's layout and its examples."""
    schedule = run_schedule(run)
    dataset = run.dataset
    packed = isinstance(dataset, PackedDataset)
    steps = []
    for s in range(run_steps(run, schedule)):
        batches = []
        for _, examples in schedule.step(s, run.rank).micro_batches:
            if packed:  # blocks keep their own layout: one row each, no shared prefix
                layout = rows_layout([int(n) for n in dataset.lengths[examples]], run.sequence_len)
            else:
                layout = layout_of([dataset[int(j)] for j in examples], run.sequence_len)
            batches.append((layout, examples))
        steps.append(batches)
    return steps


def step_tokens(run: LoopRun) -> np.ndarray:
    """Real tokens (padding excluded) this rank trains at each optimizer step of `run`.

    Returns:
        1-D int64 [steps]: entry `s` is what step `s + 1` adds to `LoopState.tokens`.
    """
    return np.array([sum(layout.tokens for layout, _ in step) for step in _layouts(run)], dtype=np.int64)


def step_work(run: LoopRun, config: Any) -> tuple[np.ndarray, np.ndarray]:
    """Real tokens and estimated work (module docstring) of each step of `run` on this
    rank, for a decoder of `config` (a transformers config: `hidden_size`,
    `intermediate_size`, `num_hidden_layers`, `num_attention_heads`,
    `num_key_value_heads`, `vocab_size`).

    Returns:
        (1-D int64 [steps] tokens, 1-D float64 [steps] work in token-passes of the
        decoder's linear layers).
    """
    hidden, layers = int(config.hidden_size), int(config.num_hidden_layers)
    kv = hidden * int(config.num_key_value_heads) // int(config.num_attention_heads)
    weights = layers * (hidden * (2 * hidden + 2 * kv) + 3 * hidden * int(config.intermediate_size))
    head = int(config.vocab_size) * hidden / weights
    attention = 2 * hidden * layers / weights  # per (query, key) pair, forward
    kl = run.hyper.replay_loss == "kl"
    dataset, loss_tokens = run.dataset, run.dataset.loss_tokens
    is_replay = example_kinds(dataset) == "replay"
    tokens, work = [], []
    for step in _layouts(run):
        t = w = 0.0
        for layout, examples in step:
            t += layout.tokens
            losses = loss_tokens[examples]
            w += 2 * layout.rows * layout.width + 2 * head * float(losses.sum())
            w += 3 * attention * layout.pairs
            replay = is_replay[examples]
            if kl and replay.any():
                lengths = dataset.lengths[examples][replay]
                if layout.rows == 1:  # the prefix and the replay tails, one row
                    tails = [int(n) - layout.prefix for n in lengths]
                    base = layout.prefix + sum(tails)
                    pairs = attention_pairs(layout.prefix, tails, base)
                else:  # the rows holding replay positions
                    base, pairs = len(lengths) * layout.width, len(lengths) * layout.width**2
                w += base + head * float(losses[replay].sum()) + attention * pairs
        tokens.append(t)
        work.append(w)
    return np.array(tokens, dtype=np.int64), np.array(work, dtype=np.float64)

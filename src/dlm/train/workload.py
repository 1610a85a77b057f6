"""What a run will train, step by step, counted before its first step.

The progress bar's total, the ETA and `dlm train --dry-run` count tokens as the loop
does (`LoopState.tokens`, the report's `train_tokens`): the real tokens of this rank's
micro-batches, each in the layout the loop gives it (`dlm.train.shared_prefix`: a row of
several chat examples holds their shared prefix, the system turn, once). Counting every
example at its own length instead overstates a run of short chat examples by the prefix
of all but one example of each micro-batch, about a fifth of a small document's tokens,
so the bar stopped short of its total and the ETA read half a minute at the last step.

`step_tokens` walks the loop's own schedule (`dlm.train.loop.run_schedule`) over the
run's steps and sizes each micro-batch with `layout_tokens`, which decides the layout
the way `micro_batch` does without building tensors; packed blocks are sized from their
lengths alone (they keep their own layout).
"""

from __future__ import annotations

import numpy as np

from dlm.train.loop import LoopRun, run_schedule, run_steps
from dlm.train.shared_prefix import layout_tokens


def step_tokens(run: LoopRun) -> np.ndarray:
    """Real tokens (padding excluded) this rank trains at each optimizer step of `run`.

    Returns:
        1-D int64 [steps]: entry `s` is what step `s + 1` adds to `LoopState.tokens`.
    """
    schedule = run_schedule(run)
    dataset = run.dataset
    packed = hasattr(dataset, "order")
    lengths = dataset.lengths
    out = np.zeros(run_steps(run, schedule), dtype=np.int64)
    for s in range(len(out)):
        for _, examples in schedule.step(s, run.rank).micro_batches:
            if packed:
                out[s] += int(lengths[examples].sum())
            else:
                out[s] += layout_tokens([dataset[int(j)] for j in examples], run.sequence_len)[0]
    return out

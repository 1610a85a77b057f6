"""Train loss per row kind (prose, instruction, source), from the forward pass the
trainer already runs: no second pass, no change to the loss being optimized.

How: every example the data loader fetches is recorded with the kind of each of its
tokens (`KindLoss.wrap`; a window has its row's kind, a packed block the kinds of the
rows it spans). A pre-hook on the input embeddings sees each training micro-batch's
`input_ids` [B, T] and matches each row to a recorded example (same ids, right-padded,
as the collator pads); the trainer's loss then hands over the per-token NLL it computed
anyway (`see_nll`, from `dlm.train.lm_loss`: position t holds the NLL of label t + 1,
as the model's own loss shifts them), and each loss token's NLL is added, detached, to
its kind's sum. `take_window` returns and resets the per-kind means; the callback does
so at each logging step, so one window is the optimizer step's micro-batches. Only
forward passes in training mode with grad on count (the held-out scoring runs in eval
mode).

Cost: a gather of [B, T] floats per micro-batch. A batch that cannot be matched (an
example fetched but not trained, a different padding side) is left out of the window
rather than guessed; a trainer that computes no per-token NLL records none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

KINDS = ("prose", "instruction", "source")
MAX_PENDING = 4096


class KindLoss:
    """Per-kind train loss over logging windows (module docstring).

    Args:
        dataset: a `WindowDataset` (`row`, per example) or `PackedDataset` (`order`,
            `offsets`, `sequence_len`, `total`) from `dlm.train.dataset`.
        row_kinds: the kind of each row of the dataset's `rows` (`TokenizedRows.kinds`).
    """

    def __init__(self, dataset: Any, row_kinds: Sequence[str]) -> None:
        self.dataset = dataset
        self.row_kind = np.fromiter((KINDS.index(k) for k in row_kinds), dtype=np.int64, count=len(row_kinds))
        self.pending: deque[tuple[np.ndarray, np.ndarray, np.ndarray]] = deque(maxlen=MAX_PENDING)
        self.current: list[tuple[int, np.ndarray, np.ndarray]] | None = None
        self.sums = np.zeros(len(KINDS))
        self.counts = np.zeros(len(KINDS), dtype=np.int64)

    def token_kinds(self, i: int) -> np.ndarray | None:
        """1-D int64 [n]: the kind index (into `KINDS`) of each token of example `i`."""
        ds = self.dataset
        if hasattr(ds, "row"):
            n = int(ds.stop[i] - ds.start[i])
            return np.full(n, self.row_kind[int(ds.row[i])], dtype=np.int64)
        if hasattr(ds, "windows") and hasattr(ds, "block_start"):  # a packed block of whole windows
            b = int(ds.order[i])
            members = ds.members[ds.block_start[b] : ds.block_start[b + 1]]
            w = ds.windows
            return (
                np.concatenate(
                    [
                        np.full(int(w.stop[m] - w.start[m]), self.row_kind[int(w.row[m])], dtype=np.int64)
                        for m in members
                    ]
                )
                if len(members)
                else np.zeros(0, np.int64)
            )
        return None

    def wrap(self, dataset: Any) -> Any:
        """`dataset` (map-style) recording each fetched example with its token kinds."""
        tracker = self

        class Recording:
            def __len__(self) -> int:
                return len(dataset)

            def __getitem__(self, i: int) -> dict[str, np.ndarray]:
                example = dataset[i]
                kinds = tracker.token_kinds(int(i))
                if kinds is not None and len(kinds) == len(example["labels"]):
                    tracker.pending.append((example["input_ids"], example["labels"], kinds))
                return example

        return Recording()

    def attach(self, model: Any) -> list[Any]:
        """Register the input hook on `model` (a transformers causal LM); returns handles
        to `remove()`. The trainer must also call `see_nll` after each forward."""
        return [model.get_input_embeddings().register_forward_pre_hook(self._see_inputs)]

    def _see_inputs(self, module: Any, args: tuple[Any, ...]) -> None:
        import torch

        self.current = None
        if not (module.training and torch.is_grad_enabled()) or not args:
            return
        ids = args[0].detach().cpu().numpy()  # [B, T]
        matched = []
        for j in range(ids.shape[0]):
            found = self._match(ids[j])
            if found is None:
                return
            matched.append((j, *found))
        self.current = matched

    def _match(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        while self.pending:
            ids, labels, kinds = self.pending.popleft()
            if len(ids) <= len(row) and np.array_equal(row[: len(ids)], ids):
                return labels, kinds
        return None

    def see_nll(self, nll: Any) -> None:
        """Add a training micro-batch's per-token NLL to the window of each token's kind.

        Args:
            nll: float [B, T] tensor (detached): position t holds the NLL of label t + 1;
                rows follow the `input_ids` the input hook last saw.
        """
        current, self.current = self.current, None
        if current is None or nll.dim() != 2:
            return
        values = nll.float().cpu().numpy()
        for j, labels, kinds in current:
            n = len(labels)
            if n < 2:
                continue
            keep = labels[1:n] != -100
            k = kinds[1:n][keep]
            self.sums += np.bincount(k, weights=values[j, : n - 1][keep], minlength=len(KINDS))
            self.counts += np.bincount(k, minlength=len(KINDS))

    def take_window(self) -> dict[str, tuple[float, int]]:
        """kind -> (mean nats per loss token, loss tokens) since the last call, for the
        kinds that had any; then starts a new window."""
        out = {
            KINDS[k]: (float(self.sums[k] / self.counts[k]), int(self.counts[k]))
            for k in range(len(KINDS))
            if self.counts[k]
        }
        self.sums[:] = 0
        self.counts[:] = 0
        return out

    def callback(self, on_window: Any) -> Any:
        """A transformers `TrainerCallback` calling `on_window(step, take_window())` at
        each logging step, before the step's loss is logged."""
        from transformers import TrainerCallback

        tracker = self

        class KindWindow(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
                if state.global_step % max(int(args.logging_steps), 1) == 0:
                    window = tracker.take_window()
                    if window:
                        on_window(state.global_step, window)

        return KindWindow()

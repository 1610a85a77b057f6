"""Examples to micro-batches: the order of a run, each rank's share, and the tensors.

The order (`Schedule`): epoch `e` visits every example once, in a permutation drawn from
NumPy's PCG64 seeded with `(seed, e)`. Its examples are then cut into micro-batches of
similar length, so short examples are not padded to a long one's length: the whole
epoch's permutation is sorted by the length each example would be padded to
(`padded_length`), then, among equal widths, by which sighting of its original an
example is (copies of one Q/A pair repeated 12 times share an original: all first
sightings of the width's examples come before all second ones), then by the
permutation (a stable sort). So copies of one example share a micro-batch only when
their width holds fewer originals than a micro-batch holds examples, and examples of
equal width meet other partners each epoch. The sorted order is cut into micro-batches of `micro_batch`
examples, and those micro-batches are put in an order drawn from the same generator.
Sorting the whole epoch, not slices of it, matters for the few long examples (a long
source window among short Q/A pairs): only across an epoch do they find partners of
about their own length instead of sharing a micro-batch with one twice as long. The
last micro-batch of an epoch may be short. The order is a pure function of the example
lengths and the seed: every rank computes the same one, and a resumed run finds its
place by arithmetic.

Optimizer step `s` takes the global micro-batches `s * A * W ... (s + 1) * A * W - 1`
(`A` accumulation steps, `W` ranks), and rank `r` trains those whose index is `r`
modulo `W`. So `--nproc 2` trains the micro-batches one process with 2 accumulation
steps trains, and the keyed dropout (`dlm.train.dropout`) gives them the same masks.
Every rank also knows the loss tokens of the whole step (`Step.loss_tokens`), the
divisor of the step's loss, without asking the others.

A micro-batch (`collate`) is `[B, n]`, `n` the longest example rounded up by
`padded_length`: a multiple of `MIN_STEP` below 64 tokens and of an eighth of its power
of two from 64 up, so padding stays under an eighth of the longest example (under
`MIN_STEP` tokens below 64) while a run sees at most 8 shapes per doubling of length
(48 up to 2048), not one per length: a CPU's bfloat16 matmuls keep a compiled kernel per
shape (docs/determinism.md, "Batch lengths rounded up").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

# the smallest width step (module docstring): the eighth-of-a-doubling rule reaches it at
# 64; below, a finer step would add shapes to save fewer than 8 tokens a row, and widths in
# whole 8s keep bfloat16 matmuls on the sizes GPU tensor cores take
MIN_STEP = 8
# the batching rule, recorded in the determinism lock: another rule trains other bytes
ORDER_MODE = "width-sorted-epoch-copies-apart-step8"
KINDS = ("prose", "instruction", "source", "synth", "replay")  # per-kind loss buckets; index len(KINDS): no loss
# a batch's inputs for the replay KL's base pass carry this prefix (`dlm.train.replay_kl`)
BASE = "base_"


def padded_length(n: int, limit: int | None = None) -> int:
    """`n` tokens rounded up to a multiple of `max(MIN_STEP, 2 ** floor(log2 n) / 8)`, at
    most `max(n, limit)`: 5 -> 8, 60 -> 64, 70 -> 72, 130 -> 144, 700 -> 704, 1500 -> 1536."""
    step = max(MIN_STEP, (1 << max(int(n).bit_length() - 1, 0)) // 8)
    rounded = -(-int(n) // step) * step
    return max(int(n), min(rounded, limit)) if limit is not None else rounded


def sightings(originals: np.ndarray) -> np.ndarray:
    """1-D int64 [n]: for each position, how many earlier positions hold the same
    original (0 for its first sighting, 1 for its second, ...)."""
    by_original = np.argsort(originals, kind="stable")
    ordered = originals[by_original]
    first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    run_start = np.repeat(first, np.diff(np.r_[first, len(ordered)]))
    seen = np.empty(len(originals), dtype=np.int64)
    seen[by_original] = np.arange(len(originals)) - run_start
    return seen


def epoch_steps(n_examples: int, micro_batch: int, micro_batches_per_step: int, epochs: float) -> int:
    """Optimizer steps that cover `epochs` passes over `n_examples` in micro-batches of
    `micro_batch` (an epoch's last one may be short), `micro_batches_per_step` a step over
    all ranks; at least 1."""
    per_epoch = -(-n_examples // micro_batch)
    return max(1, int(np.ceil(epochs * per_epoch / micro_batches_per_step)))


@dataclass(frozen=True)
class Step:
    """One optimizer step's share for this rank.

    Attributes:
        micro_batches: this rank's micro-batches, each a 1-D int64 array of example indices,
            with the global index of each (for the keyed dropout).
        loss_tokens: loss-carrying tokens of the step's micro-batches on every rank.
    """

    micro_batches: list[tuple[int, np.ndarray]]
    loss_tokens: int


class Schedule:
    """The run's order of micro-batches (module docstring).

    Args:
        lengths: 1-D int [n_examples], tokens per example.
        loss_tokens: 1-D int [n_examples], loss-carrying tokens per example (labels after
            the first position that are not -100).
        micro_batch: examples per micro-batch (`training.batch_size`).
        accumulation: micro-batches each rank sums per optimizer step.
        world_size: ranks.
        seed: `training.seed`.
        limit: the run's `sequence_len` (the padded width never passes it).
        originals: 1-D int [n_examples], the distinct example each one copies (copies
            of a repeated example share it); None: every example is its own.
    """

    def __init__(
        self,
        lengths: np.ndarray,
        loss_tokens: np.ndarray,
        micro_batch: int,
        accumulation: int,
        world_size: int,
        seed: int,
        limit: int | None = None,
        originals: np.ndarray | None = None,
    ) -> None:
        if len(lengths) == 0:
            raise ValueError("no training examples to schedule")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.loss_tokens = np.asarray(loss_tokens, dtype=np.int64)
        self.micro_batch, self.accumulation, self.world_size = micro_batch, accumulation, world_size
        self.seed, self.limit = seed, limit
        self.originals = None if originals is None else np.asarray(originals, dtype=np.int64)
        self._epochs: dict[int, list[np.ndarray]] = {}

    @property
    def per_step(self) -> int:
        """Micro-batches in one optimizer step, over all ranks."""
        return self.accumulation * self.world_size

    @property
    def micro_batches_per_epoch(self) -> int:
        return -(-len(self.lengths) // self.micro_batch)

    def steps_for(self, epochs: float) -> int:
        """Optimizer steps that cover `epochs` passes over the examples (`epoch_steps`)."""
        return epoch_steps(len(self.lengths), self.micro_batch, self.per_step, epochs)

    def epoch(self, e: int) -> list[np.ndarray]:
        """Epoch `e`'s micro-batches in training order (module docstring); memoized for the
        current epoch only."""
        if e not in self._epochs:
            self._epochs = {e: self._cut(e)}
        return self._epochs[e]

    def _cut(self, e: int) -> list[np.ndarray]:
        rng = np.random.default_rng([self.seed, e])
        order = rng.permutation(len(self.lengths))
        widths = np.fromiter((padded_length(int(n), self.limit) for n in self.lengths[order]), dtype=np.int64)
        if self.originals is None:
            order = order[np.argsort(widths, kind="stable")]
        else:
            order = order[np.lexsort((sightings(self.originals[order]), widths))]
        cut = [order[i : i + self.micro_batch] for i in range(0, len(order), self.micro_batch)]
        return [cut[i] for i in rng.permutation(len(cut))]

    def micro_batch_at(self, index: int) -> np.ndarray:
        """The examples of global micro-batch `index` (epochs follow each other)."""
        per_epoch = self.micro_batches_per_epoch
        return self.epoch(index // per_epoch)[index % per_epoch]

    def step(self, s: int, rank: int) -> Step:
        """Optimizer step `s` (0-based) as rank `rank` trains it."""
        first = s * self.per_step
        indices = range(first, first + self.per_step)
        everyone = [self.micro_batch_at(j) for j in indices]
        mine = [(j, batch) for j, batch in zip(indices, everyone, strict=True) if j % self.world_size == rank]
        return Step(mine, int(sum(int(self.loss_tokens[b].sum()) for b in everyone)))


@dataclass(frozen=True)
class Batch:
    """A collated micro-batch on the host.

    Attributes:
        inputs: the model's keyword arguments: int64 [B, n] `input_ids`, `labels` (-100:
            no loss), and `position_ids` (packed blocks) or `attention_mask`; int64
            [n_loss] `loss_rows`, the flat positions whose next label carries loss.
        kinds: int64 [B * n], the per-kind bucket of each position's loss (`KINDS` index of
            the token it predicts; `len(KINDS)` where no loss is taken).
        tokens: real (unpadded) tokens; `processed`: B * n.
        segments: int64 [n] for one row of several examples
            (`dlm.train.shared_prefix.collate_row`): 0 the shared prefix, k the k-th
            example's tail, -1 padding; None for the layouts here.
    """

    inputs: dict[str, torch.Tensor]
    kinds: torch.Tensor
    tokens: int
    processed: int
    segments: torch.Tensor | None = None


def collate(
    examples: Sequence[dict[str, np.ndarray]],
    pad_id: int,
    limit: int | None = None,
    token_kinds: Sequence[np.ndarray] | None = None,
) -> Batch:
    """Stack `examples` (`dlm.train.dataset`: 1-D int arrays `input_ids`, `labels`, and
    `position_ids` for packed blocks) into a `Batch` of width `padded_length(longest)`.

    Shorter examples are right-padded with `pad_id` (never attended to or scored), labels
    with -100. Packed blocks get `position_ids` whose padded tail restarts at 0, a sequence
    of its own that nobody attends to, and no `attention_mask`: transformers then masks
    attention block-diagonally where the positions restart
    (`masking_utils.find_packed_sequence_indices`); windows get an `attention_mask`.
    `token_kinds`, one `KINDS` index array per example, fills `Batch.kinds`.

    Raises:
        ValueError: an empty batch, or one mixing packed blocks and windows.
    """
    if not examples:
        raise ValueError("cannot collate an empty batch")
    examples = [{k: np.asarray(v) for k, v in e.items()} for e in examples]
    packed = {"position_ids" in e for e in examples}
    if len(packed) != 1:
        raise ValueError("a batch mixes packed blocks and plain windows")
    sizes = [int(e["input_ids"].shape[0]) for e in examples]
    batch, n = len(examples), padded_length(max(sizes), limit)
    ids = np.full((batch, n), pad_id, dtype=np.int64)
    labels = np.full((batch, n), -100, dtype=np.int64)
    kinds = np.full((batch, n), len(KINDS), dtype=np.int64)
    for i, (e, k) in enumerate(zip(examples, sizes, strict=True)):
        ids[i, :k], labels[i, :k] = e["input_ids"], e["labels"]
        if token_kinds is not None:
            kinds[i, : k - 1] = np.where(labels[i, 1:k] != -100, token_kinds[i][1:k], len(KINDS))
    next_labels = np.concatenate([labels[:, 1:], np.full((batch, 1), -100)], axis=1).reshape(-1)
    inputs = {
        "input_ids": torch.from_numpy(ids),
        "labels": torch.from_numpy(labels),
        "loss_rows": torch.from_numpy(np.flatnonzero(next_labels != -100).astype(np.int64)),
    }
    if packed.pop():
        positions = np.empty((batch, n), dtype=np.int64)
        for i, (e, k) in enumerate(zip(examples, sizes, strict=True)):
            positions[i, :k] = e["position_ids"]
            positions[i, k:] = np.arange(n - k)
        inputs["position_ids"] = torch.from_numpy(positions)
    else:
        inputs["attention_mask"] = torch.from_numpy((np.arange(n)[None, :] < np.array(sizes)[:, None]).astype(np.int64))
    return Batch(inputs, torch.from_numpy(kinds.reshape(-1)), sum(sizes), batch * n)


def to_device(inputs: dict[str, torch.Tensor], device: torch.device) -> dict[str, Any]:
    """A batch's `inputs` (`Batch.inputs`) on `device`: from pinned memory without waiting
    on a GPU, as is."""
    if device.type == "cpu":
        return dict(inputs)
    return {k: v.pin_memory().to(device, non_blocking=True) for k, v in inputs.items()}

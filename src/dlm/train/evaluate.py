"""Held-out loss: mean cross-entropy per loss-carrying token over fixed examples.

The examples are cut once from the held-out rows (`dlm.train.heldout`), whose ids come
from the same tokenize call as training (so from the cache when it is on): one window
of at most `sequence_len` tokens per scored row. Prose and source rows are scored from
their first token; an instruction row from a window that holds its answer, and only the
answer tokens carry loss (the prompt is masked as in training). A window cut from a long
file is a sample of that file, which keeps the cost bounded by
`max_rows * sequence_len` tokens per measurement.

    loss        = sum of -log p(token | tokens before) over loss tokens / loss tokens  (nats)
    perplexity  = exp(loss)

The same examples are scored before the first optimizer step (on the base model, since
every run trains a fresh adapter from the base) and after the last, so the two numbers
compare. Scoring runs under `torch.no_grad()` with the model in eval mode (no dropout),
which draws nothing from any random generator: the training run is unchanged by it.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from dlm.tokenize.seam import TokenizedRows

# held-out tokens per forward pass: SmolLM2's (B, T, V) float32 logits take 200 MB per 1024 tokens,
# so a pass's peak grows with its tokens (docs/benchmarks.md, "Held-out scoring: tokens per pass")
TOKENS_PER_BATCH = 1024
# a scoring batch's width is rounded up to a multiple of this, so a CPU's bfloat16 matmuls
# see a few shapes, not one per length (`dlm.train.data` says why)
WIDTH_MULTIPLE = 16


@dataclass(frozen=True)
class EvalExample:
    """One scored window. `input_ids`: 1-D int64 [n]; `labels`: same, -100 where masked."""

    input_ids: np.ndarray
    labels: np.ndarray
    kind: str


@dataclass(frozen=True)
class EvalSet:
    """The fixed examples every measurement of a run scores."""

    examples: list[EvalExample]

    @property
    def rows(self) -> int:
        return len(self.examples)

    @property
    def tokens(self) -> int:
        return int(sum(e.input_ids.shape[0] for e in self.examples))

    @property
    def kinds(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for e in self.examples:
            counts[e.kind] = counts.get(e.kind, 0) + 1
        return counts


@dataclass(frozen=True)
class EvalResult:
    """One measurement. `loss` in nats per loss token; `by_kind[kind]` the same per row kind
    (for instruction rows it is the answer-only loss)."""

    loss: float
    perplexity: float
    rows: int
    tokens: int
    loss_tokens: int
    by_kind: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def eval_window(length: int, n_prompt: int, sequence_len: int) -> tuple[int, int] | None:
    """`(start, stop)` token bounds of the window a row is scored on, or None when that
    window would hold no loss token. Rows with a short prompt (all prose and source rows)
    start at 0; a longer prompt keeps its last `sequence_len // 2` tokens before the answer."""
    start = 0 if n_prompt < sequence_len // 2 else n_prompt - sequence_len // 2
    stop = min(length, start + sequence_len)
    if stop - max(start + 1, n_prompt) < 1:
        return None
    return start, stop


def build_eval_set(rows: TokenizedRows, sequence_len: int) -> EvalSet:
    """One window per row of `rows` (the scored held-out rows), see module docstring.

    Rows whose window holds no loss token are left out.
    """
    examples = []
    for i in range(len(rows)):
        n_prompt = int(rows.n_prompt[i])
        window = eval_window(int(rows.lengths[i]), n_prompt, sequence_len)
        if window is None:
            continue
        start, stop = window
        ids = rows.read(i)[start:stop].astype(np.int64)
        labels = np.where(np.arange(start, stop) >= n_prompt, ids, -100)
        examples.append(EvalExample(ids, labels, rows.kinds[i]))
    return EvalSet(examples)


def _batches(examples: list[EvalExample]) -> list[list[int]]:
    """Example indices grouped by length so padding stays small, <= TOKENS_PER_BATCH tokens."""
    order = sorted(range(len(examples)), key=lambda i: examples[i].input_ids.shape[0])
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        width = examples[i].input_ids.shape[0]
        if current and (len(current) + 1) * width > TOKENS_PER_BATCH:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches


def example_nll(model: Any, examples: list[EvalExample], pad_id: int = 0) -> tuple[list[float], list[int]]:
    """Per example: (sum of -log p over its loss tokens in nats, its loss-token count).

    Examples are batched by length (right padding to a multiple of `WIDTH_MULTIPLE`,
    attention mask), scored under
    `torch.no_grad()` in eval mode with the LM head fused into the NLL (no logits over
    the vocabulary are kept); the model's train/eval mode is restored afterwards.
    Both lists follow `examples`' order.
    """
    import torch

    from dlm.train.lm_loss import causal_lm_token_nll

    was_training = model.training
    device = next(model.parameters()).device
    sums, counts = [0.0] * len(examples), [0] * len(examples)
    model.eval()
    try:
        with torch.no_grad():
            for batch in _batches(examples):
                longest = max(examples[i].input_ids.shape[0] for i in batch)
                width = -(-longest // WIDTH_MULTIPLE) * WIDTH_MULTIPLE
                ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, T)
                labels = torch.full((len(batch), width), -100, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, i in enumerate(batch):
                    ex = examples[i]
                    n = ex.input_ids.shape[0]
                    ids[row, :n] = torch.from_numpy(ex.input_ids)
                    labels[row, :n] = torch.from_numpy(ex.labels)
                    mask[row, :n] = 1
                # the LM head fused with the NLL, a chunk of positions at a time: no (B, T, V)
                # logits (`dlm.train.lm_loss`); position t holds the NLL of label t + 1
                inputs = {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels}
                nll = causal_lm_token_nll(model, inputs)
                per_row = nll.sum(dim=1).cpu().tolist()
                per_count = (labels[:, 1:] != -100).sum(dim=1).tolist()  # the labels predicted
                for row, i in enumerate(batch):
                    sums[i], counts[i] = float(per_row[row]), int(per_count[row])
    finally:
        model.train(was_training)
    return sums, counts


@contextmanager
def scoring_precision(model: Any, precision: str) -> Iterator[None]:
    """Score under bfloat16 autocast when `precision` is `bfloat16` (the weights stay as
    loaded, the NLL is summed in float32), plain float32 otherwise; `model` attends as
    training attends (`dlm.train.attention.use_dlm_attention`)."""
    import torch

    from dlm.train.attention import use_dlm_attention

    device = next(model.parameters()).device.type
    use_dlm_attention(model)
    with torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bfloat16"):
        yield


def heldout_loss(model: Any, eval_set: EvalSet, pad_id: int = 0, precision: str = "float32") -> EvalResult:
    """Score `eval_set` with `model` (a causal LM, peft-wrapped or not), in `precision`
    (the run's training dtype name: `scoring_precision`).

    The model's train/eval mode is restored afterwards.

    Raises:
        ValueError: `eval_set` is empty.
    """
    if not eval_set.examples:
        raise ValueError("no held-out examples to score")
    with scoring_precision(model, precision):
        sums, counts = example_nll(model, eval_set.examples, pad_id)
    nll_by_kind: dict[str, float] = {}
    count_by_kind: dict[str, int] = {}
    for ex, nll, count in zip(eval_set.examples, sums, counts, strict=False):
        nll_by_kind[ex.kind] = nll_by_kind.get(ex.kind, 0.0) + nll
        count_by_kind[ex.kind] = count_by_kind.get(ex.kind, 0) + count
    total_tokens = sum(count_by_kind.values())
    loss = sum(nll_by_kind.values()) / total_tokens
    return EvalResult(
        loss=loss,
        perplexity=math.exp(loss),
        rows=eval_set.rows,
        tokens=eval_set.tokens,
        loss_tokens=total_tokens,
        by_kind={k: nll_by_kind[k] / count_by_kind[k] for k in sorted(nll_by_kind) if count_by_kind[k]},
    )

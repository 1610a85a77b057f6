"""How long judging a document's questions takes, before it starts.

The probe report (`dlm.judge.report`) answers every question on three models and
scores every reference answer on three models. Two estimates of its time:

**Many questions, from a table.** Past `MANY_QUESTIONS` questions (probes and pairs
together) `dlm eval` prints one line before it starts
(`dlm.actions.evaluating.judging_notes`); nothing is capped. To a first approximation

    seconds = ceil(3 * questions / GENERATE_BATCH) * max_new_tokens * DECODE_STEP_S
            + 3 * scored_tokens * SCORE_TOKEN_S

where `scored_tokens` counts the tokens of each question and its reference answer (the
chat template around them is left out: a few tokens a question). The two costs are
those of SmolLM2-135M in float32 on a small CPU, measured and rounded up
(docs/benchmarks.md, "Judging cost"): one greedy step of a batch, and one scored token.
A larger model or a GPU changes them; the line says where it comes from, so a reader
can scale it.

**A dry run's, measured.** `dlm train --dry-run` has the run's model loaded, so it
times the report's two kinds of work on this machine (`measure_rates`: a generation
batch's first pass per prompt position, a decoding step as a fixed part and a part per
row, a scored token) and adds them up over the batches the report will make
(`answer_batches`, `JudgeRates.answer_seconds`): every greedy answer decoded to
`max_new_tokens` (an upper bound: a batch ends early only when all its rows have), the
base model's answers to the general probes counted as on a document's first report.
What it cannot know is how many general probes the adapter will flip, each confirmed by
drawn replies of the base and the adapter; that cost is given per flip.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dlm.judge.score import GENERATE_BATCH, generation_batches

MANY_QUESTIONS = 500  # questions (instruction pairs and probes) past which a run says what judging costs
DECODE_STEP_S = 0.5  # one greedy step of a GENERATE_BATCH-row batch (module docstring)
SCORE_TOKEN_S = 0.004  # one prompt or answer token scored on one model (module docstring)
RATE_ROWS = (4, 16)  # the two batch sizes `measure_rates` answers at
RATE_STEPS = 4  # decoding steps timed at each


def judging_seconds(questions: int, scored_tokens: int, max_new_tokens: int) -> float:
    """The module's estimate of judging `questions` whose prompts and answers hold
    `scored_tokens` tokens, answered `max_new_tokens` tokens long (seconds)."""
    batches = math.ceil(3 * questions / GENERATE_BATCH)
    return batches * max_new_tokens * DECODE_STEP_S + 3 * scored_tokens * SCORE_TOKEN_S


def judging_warning(
    texts: Sequence[tuple[str, str]], count_tokens: Callable[[str], int], max_new_tokens: int
) -> str | None:
    """One line when `texts` (question, answer) number more than `MANY_QUESTIONS`, with
    the estimate (`judging_seconds`); None otherwise (nothing is tokenized then).

    Args:
        texts: every question judged, with its reference answer.
        count_tokens: the base model's token count of a text.
        max_new_tokens: `training.eval.max_new_tokens`.
    """
    if len(texts) <= MANY_QUESTIONS:
        return None
    tokens = sum(count_tokens(q) + count_tokens(a) for q, a in texts)
    seconds = judging_seconds(len(texts), tokens, max_new_tokens)
    return (
        f"{len(texts):,} questions to judge (instruction pairs and probes, {tokens:,} tokens): about "
        f"{_duration(seconds)} for SmolLM2-135M on a 2-core CPU (docs/evaluation.md); fewer probes, a smaller "
        "training.eval.max_new_tokens or training.eval.judge: false makes it shorter"
    )


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


@dataclass(frozen=True)
class JudgeRates:
    """What the probe report's two kinds of work cost on this machine, measured on the
    run's own model (`measure_rates`), in seconds.

    Attributes:
        prefill_token_s: one prompt position (padding included) through the model in a
            generation batch's first pass (float32: the report answers in float32).
        step_fixed_s, step_row_s: one decoding step of a batch of R rows costs
            `step_fixed_s + R * step_row_s` (the weights read and the step's Python, and
            each row's share; docs/benchmarks.md, "Probe report: generation batch").
        score_token_s: one token scored (its NLL) in the training precision.
    """

    prefill_token_s: float
    step_fixed_s: float
    step_row_s: float
    score_token_s: float

    def answer_seconds(self, batches: Sequence[tuple[int, int]], max_new_tokens: int) -> float:
        """Seconds to answer generation batches of `(rows, prompt width)`, each decoding
        `max_new_tokens` steps (a batch stops sooner only when every row has ended)."""
        return sum(
            self.prefill_token_s * rows * width + max_new_tokens * (self.step_fixed_s + rows * self.step_row_s)
            for rows, width in batches
        )


def measure_rates(
    model: Any, tokenizer: Any, prompts: Sequence[str], adapter: str, scored: Sequence[Any], precision: str
) -> JudgeRates:
    """`JudgeRates` of `model` (a peft model with adapter `adapter`) on this machine:
    `RATE_ROWS` rows of `prompts` (cycled, half on the base and half on the adapter)
    answered for one and for `1 + RATE_STEPS` tokens at two batch sizes, and `scored`
    (`dlm.train.evaluate.EvalExample`s) scored once. A few seconds on a small CPU.

    Raises:
        ValueError: `prompts` is empty.
    """
    from dlm.judge.score import BASE, greedy_rows
    from dlm.train.evaluate import example_nll, scoring_precision

    if not prompts:
        raise ValueError("no prompts to time the answers with")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    steps, prefill = {}, {}
    for n in RATE_ROWS:
        rows = [(prompts[i % len(prompts)], (BASE, adapter)[i % 2]) for i in range(n)]
        width = max(len(tokenizer(p, add_special_tokens=False)["input_ids"]) for p, _ in rows)
        one = _timed(greedy_rows, model, tokenizer, rows, 1, batch=n)
        more = _timed(greedy_rows, model, tokenizer, rows, 1 + RATE_STEPS, batch=n)
        steps[n] = max(more - one, 0.0) / RATE_STEPS
        prefill[n] = max(one - steps[n], 0.0) / (n * width)
    small, large = RATE_ROWS
    row = max(steps[large] - steps[small], 0.0) / (large - small)
    with scoring_precision(model, precision):
        seconds = _timed(example_nll, model, list(scored), pad_id)
    tokens = sum(int(ex.input_ids.shape[0]) for ex in scored)
    return JudgeRates(prefill[large], max(steps[small] - small * row, 0.0), row, seconds / max(tokens, 1))


def _timed(work: Callable[..., object], *args: Any, **kwargs: Any) -> float:
    start = time.perf_counter()
    work(*args, **kwargs)
    return time.perf_counter() - start


def answer_batches(
    groups: Sequence[tuple[int, int]], max_new_tokens: int, positions: int | None
) -> list[tuple[int, int]]:
    """`(rows, widest prompt)` of each generation batch `dlm.judge.score.greedy_rows`
    would make of prompts given as `(width in tokens, rows)`, in any order."""
    ordered = sorted(groups)
    indexed, at = [], 0
    for width, rows in ordered:
        indexed.append((width, list(range(at, at + rows))))
        at += rows
    width_of = {j: width for width, members in indexed for j in members}
    batches = generation_batches(indexed, max_new_tokens, GENERATE_BATCH, positions)
    return [(len(b), max(width_of[j] for j in b)) for b in batches]

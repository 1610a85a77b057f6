"""How long judging a document's questions takes, before it starts: one warning line
when there are many.

The probe report (`dlm.judge.report`) answers every question on three models and
scores every reference answer on three models. Its time is, to a first approximation,

    seconds = ceil(3 * questions / GENERATE_BATCH) * max_new_tokens * DECODE_STEP_S
            + 3 * scored_tokens * SCORE_TOKEN_S

where `scored_tokens` counts the tokens of each question and its reference answer (the
chat template around them is left out: a few tokens a question).
The two costs are those of SmolLM2-135M in float32 on a small CPU, measured and rounded
up (docs/benchmarks.md, "Judging cost"): one greedy step of a batch, and one scored
token. A larger
model or a GPU changes them; the estimate says where it comes from, so a reader can
scale it. Past `MANY_QUESTIONS` questions (probes and pairs together) `dlm eval` prints
one line with the estimate before it starts (`dlm.actions.evaluating.judging_notes`);
nothing is capped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from dlm.judge.score import GENERATE_BATCH

MANY_QUESTIONS = 500  # questions (instruction pairs and probes) past which a run says what judging costs
DECODE_STEP_S = 0.5  # one greedy step of a GENERATE_BATCH-row batch (module docstring)
SCORE_TOKEN_S = 0.004  # one prompt or answer token scored on one model (module docstring)


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

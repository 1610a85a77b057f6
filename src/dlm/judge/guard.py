"""What training broke: the general-ability guard.

A fixed set of short general passages (prose and code in several languages) that ships
with `dlm` (`dlm.judge.general`) is scored on the base model and on the adapter: mean
negative log-likelihood per token, every token after the first (nats). The change is
reported against the base, in percent: `100 * (adapter - base) / base`. A positive
change means the adapter predicts general text worse; `training.eval.general_max_increase`
(percent) turns a larger change into a warning.

Precision: both models are scored in the precision the adapter trains in
(`dlm.train.precision`): under bfloat16 autocast where `auto` picks it. The guard is
matrix products over about 7,000 tokens per model, which a CPU with bfloat16
instructions runs faster in bfloat16, and the NLL moves by far less than the changes the
guard warns about (the change is a difference of two such numbers scored alike;
docs/benchmarks.md, "General-text guard in bfloat16"). Greedy replies and reference
log-probabilities stay float32: the
replies are what `dlm prompt` answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlm.train.evaluate import EvalExample, example_nll, scoring_precision

GUARD_MAX_TOKENS = 256


@dataclass(frozen=True)
class GuardScore:
    """Mean NLL per token (nats) of the general set on one model; `tokens` scored."""

    nll: float
    passages: int
    tokens: int


def guard_examples(tokenizer: Any, texts: Sequence[str]) -> list[EvalExample]:
    """Each passage as one example: its first `GUARD_MAX_TOKENS` ids, all of them labels.

    `input_ids`: 1-D int64 [<= GUARD_MAX_TOKENS].
    """
    examples = []
    for text in texts:
        ids = np.asarray(tokenizer(text, add_special_tokens=False)["input_ids"][:GUARD_MAX_TOKENS], dtype=np.int64)
        if ids.shape[0] >= 2:
            examples.append(EvalExample(ids, ids.copy(), "general"))
    return examples


def guard_score(model: Any, examples: list[EvalExample], pad_id: int, precision: str = "float32") -> GuardScore:
    """Score the general examples on `model` (module docstring), under bfloat16 autocast
    when `precision` is `bfloat16` (the weights stay as loaded; the NLL is summed in float32)."""
    with scoring_precision(model, precision):
        sums, counts = example_nll(model, examples, pad_id)
    total = sum(counts)
    return GuardScore(sum(sums) / total if total else 0.0, len(examples), total)


def change_pct(base: GuardScore, adapter: GuardScore) -> float:
    """`100 * (adapter - base) / base`, the guard's one number (percent, rounded to 0.01)."""
    return round(100.0 * (adapter.nll - base.nll) / base.nll, 2) if base.nll else 0.0

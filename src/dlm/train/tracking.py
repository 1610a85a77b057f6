"""What a run measures about itself besides the train loss: the held-out loss at each
measurement (the tokens it plans to process, for the ETA: `dlm.train.workload`).

Library code only: measurements go to the metrics database and to the run's sink
(`on_eval`, `on_plan`), which the CLI renders.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.metrics import EvalRecord, MetricsDB
from dlm.train.base_score import BaseScoreMemo
from dlm.train.evaluate import EvalResult, EvalSet, heldout_loss


def _record(phase: str, step: int, result: EvalResult) -> EvalRecord:
    return EvalRecord(
        phase,
        step,
        result.loss,
        result.perplexity,
        result.rows,
        result.tokens,
        result.loss_tokens,
        result.by_kind.get("instruction"),
    )


@dataclass
class HeldOutTracker:
    """Scores a fixed `EvalSet` before, during (every `every_steps`) and after training,
    writing each measurement to `metrics` and to `sink.on_eval(phase, step, result)`.

    With `memo`, the `before` score (on the base model) is read from it when it holds
    this run's key, else computed and written to it (`dlm.train.base_score`). Every
    score is taken in `precision`, the run's training dtype name
    (`dlm.train.evaluate.scoring_precision`)."""

    eval_set: EvalSet
    metrics: MetricsDB
    run_id: str
    sink: Any
    every_steps: int | None = None
    pad_id: int = 0
    memo: BaseScoreMemo | None = None
    precision: str = "float32"
    results: list[tuple[str, int, EvalResult]] = field(default_factory=list)

    @property
    def active(self) -> bool:
        return self.eval_set.rows > 0

    def measure(self, model: Any, phase: str, step: int) -> None:
        """Score `model` (`phase` is `before` on the base model, `after`, or `step`)."""
        if not self.active:
            return
        memo = self.memo if phase == "before" else None
        result = memo.read() if memo is not None else None
        if result is None:
            result = heldout_loss(model, self.eval_set, self.pad_id, self.precision)
            if memo is not None:
                memo.write(result)
        self._keep(phase, step, result)

    def due(self, step: int, max_steps: int) -> bool:
        """Every `every_steps` steps but the last, which the caller scores once the run
        ends (`dlm.train.loop.Measurement`)."""
        return bool(self.active and self.every_steps and step % self.every_steps == 0 and step < max_steps)

    def between_steps(self, model: Any, step: int) -> bool:
        """Score `model` after `step`; never stops the run."""
        self._keep("step", step, heldout_loss(model, self.eval_set, self.pad_id, self.precision))
        return False

    def save(self, folder: Path) -> None:
        """Nothing to save: every measurement is in the metrics database already."""

    def load(self, folder: Path) -> None:
        """Nothing to load (`save`)."""

    def _keep(self, phase: str, step: int, result: EvalResult) -> None:
        self.results.append((phase, step, result))
        self.metrics.log_eval(self.run_id, _record(phase, step, result))
        self.sink.on_eval(phase, step, result)

    def summary(self) -> dict[str, Any] | None:
        """`{rows, tokens, kinds, before, after, steps[]}` for the report, or None when off."""
        if not self.results:
            return None
        by_phase: dict[str, Any] = {"before": None, "after": None}
        steps = []
        for phase, step, result in self.results:
            if phase == "step":
                steps.append({"step": step, **result.as_dict()})
            else:
                by_phase[phase] = {"step": step, **result.as_dict()}
        return {
            "rows": self.eval_set.rows,
            "tokens": self.eval_set.tokens,
            "kinds": self.eval_set.kinds,
            **by_phase,
            "steps": steps,
        }

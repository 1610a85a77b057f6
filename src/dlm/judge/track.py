"""The probes during training: their score every N steps and, when asked, the best
adapter kept and an early stop when it stops improving.

The score is the mean log-probability per token of the probes' reference answers
(`dlm.judge.score`: no generation, one batched forward pass), so measuring it every few
steps costs a fraction of a step; `dlm metrics --plot` draws it beside the loss. With
`keep` (`training.eval.keep_best`), the tracker keeps a copy of the LoRA weights (only
the trainable tensors, a few MB) whenever the score beats the best so far; when training
ends below that best, `restore_best` puts the best weights back, and after `patience`
measurements in a row without a gain of at least `MIN_GAIN` nats it asks the trainer to
stop.

Keeping is off by default because this score is a poor judge of what the report
counts: reference answers are short ("7 retries."), while a document's pairs teach
whole-sentence answers, so the score of the reference falls as the adapter learns the
document's style. On `examples/ferry.dlm`, keeping stopped a run early and published an
early step that passed far fewer pairs and paraphrases than the same run trained to the
end (docs/benchmarks.md, "Recipe sweep").

Scoring runs in eval mode under `torch.no_grad()` and draws from no random generator,
so a run with the tracker trains the same steps as one without, up to the stop. It runs
in the training precision (`precision`: bfloat16 autocast in a bfloat16 run, whose
frozen weights are held in bfloat16), as the held-out loss does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.train.evaluate import EvalExample, example_nll, scoring_precision

MIN_GAIN = 0.01
TRACKER_FILE = "probes.json"  # in a checkpoint folder (`dlm.train.checkpoint`)
BEST_FILE = "best.safetensors"


@dataclass
class ProbeTracker:
    """Scores `examples` (the probes' reference answers) every `every_steps` steps; with
    `keep`, keeps the best weights and stops after `patience` measurements without gain.

    Attributes:
        scores: (step, mean log-prob per token) of every measurement, in order.
        best_step: the step of the best score (0 before any).
    """

    examples: list[EvalExample]
    every_steps: int
    pad_id: int
    patience: int | None = None
    keep: bool = True
    on_score: Callable[[int, float], None] | None = None
    precision: str = "float32"  # the run's dtype name (`dlm.train.precision`)
    scores: list[tuple[int, float]] = field(default_factory=list)
    best_step: int = 0
    best_score: float = float("-inf")
    stopped_early: bool = False
    _best_state: dict[str, Any] | None = None
    _since_best: int = 0

    def score(self, model: Any) -> float:
        """Mean log-probability per token of the reference answers (nats, <= 0)."""
        with scoring_precision(model, self.precision):
            sums, counts = example_nll(model, self.examples, self.pad_id)
        return -sum(sums) / max(sum(counts), 1)

    def measure(self, model: Any, step: int) -> bool:
        """Score `model` at `step`; keep its LoRA weights when best. Returns True when
        training should stop (patience exhausted)."""
        value = self.score(model)
        self.scores.append((step, round(value, 4)))
        if self.on_score is not None:
            self.on_score(step, value)
        if not self.keep:
            return False
        if value > self.best_score + MIN_GAIN or self._best_state is None:
            self.best_score, self.best_step, self._since_best = value, step, 0
            self._best_state = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
            return False
        self._since_best += 1
        self.stopped_early = self.patience is not None and self._since_best >= self.patience
        return self.stopped_early

    def restore_best(self, model: Any, final_step: int) -> bool:
        """Measure the finished model; put the best weights back when it scores lower.
        Returns True when the weights were restored."""
        if not self.scores or self.scores[-1][0] != final_step:
            self.measure(model, final_step)
        if self._best_state is None or self.best_step == final_step:
            return False
        import torch

        params = dict(model.named_parameters())
        with torch.no_grad():
            for name, value in self._best_state.items():
                params[name].copy_(value)
        return True

    def due(self, step: int, max_steps: int) -> bool:
        """Every `every_steps` steps but the last (`dlm.train.loop.Measurement`)."""
        return step % self.every_steps == 0 and step < max_steps

    def between_steps(self, model: Any, step: int) -> bool:
        """`measure`: True when training should stop."""
        return self.measure(model, step)

    def save(self, folder: Path) -> None:
        """Write the scores and the best weights so far into a checkpoint `folder`, so a
        resumed run keeps the same best adapter as an uninterrupted one."""
        from safetensors.torch import save_file

        from dlm.atomic import atomic_write_json

        state = {
            "scores": self.scores,
            "best_step": self.best_step,
            "best_score": self.best_score if self._best_state is not None else None,
            "since_best": self._since_best,
            "stopped_early": self.stopped_early,
        }
        atomic_write_json(folder / TRACKER_FILE, state)
        if self._best_state is not None:
            save_file({k: v.contiguous() for k, v in self._best_state.items()}, str(folder / BEST_FILE))

    def load(self, folder: Path) -> None:
        """Read back what `save` wrote (nothing when the checkpoint has no tracker file)."""
        import json

        from safetensors.torch import load_file

        path = folder / TRACKER_FILE
        if not path.exists():
            return
        state = json.loads(path.read_text(encoding="utf-8"))
        self.scores = [(int(step), float(value)) for step, value in state["scores"]]
        self.best_step, self._since_best = int(state["best_step"]), int(state["since_best"])
        self.stopped_early = bool(state["stopped_early"])
        if state["best_score"] is not None and (folder / BEST_FILE).exists():
            self.best_score = float(state["best_score"])
            self._best_state = load_file(str(folder / BEST_FILE))

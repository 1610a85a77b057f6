"""The general-ability guard during training: an early stop before the adapter forgets.

The report's guard (`dlm.judge.guard`) says after training how much worse the adapter
predicts general text than the base model; by then the steps that cost it are spent.
`GuardStop` scores a sample of the same passages on the base before the first step and
on the adapter every few steps; when the change passes the limit
(`training.eval.general_max_increase`, percent, the report's warning threshold) at
`patience` measurements in a row (`training.eval.guard_patience`), it asks the loop to
stop and puts back the LoRA weights of its last measurement within the limit (the
base's, a zero update, when none was). The run is published from there, and the
report says where it stopped and why.

Why in a row: early in a run, at the highest learning rate, the change can rise past
the limit and fall back to a third of it by the next measurement (a transient of the
data order, seen at one seed and not another: docs/evaluation.md, "The guard's
patience"); stopping on the first pass would publish the base model for a run that
ends well within the limit. With a pass still unconfirmed, the guard also measures
after the last step, so a run never ends past the limit on a measurement it did not
take: the adapter published is at most `patience` measurement intervals of steps past
its last safe weights, and only when it came back within the limit.

The sample: every `SAMPLE_EVERY`th passage of the general set, each cut to its first
`SAMPLE_TOKENS` ids (`sample_examples`). Its change follows the whole set's: both are
mean NLL per token of the same kind of text, the sample a fifth of it, so it costs a
fraction of a step. The sample's number is not the report's, which scores every passage;
it only decides the stop.

Scoring is the report's (`guard_score`: eval mode, `torch.no_grad()`, the training
precision), draws from no random generator and changes no weight, so a run trains the
same steps with or without it, up to the stop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.judge.guard import GuardScore, change_pct, guard_score
from dlm.train.evaluate import EvalExample

SAMPLE_EVERY = 5  # every fifth passage of the general set
SAMPLE_TOKENS = 128
MEASUREMENTS = 4  # in a run: after each quarter of its steps but the last
# a shorter run is not measured: its quarters are a few steps each, and scoring the
# sample costs about a step
MIN_STEPS = 16
STATE_FILE = "guard.json"  # in a checkpoint folder (`dlm.train.checkpoint`)
SAFE_FILE = "guard-safe.safetensors"


def sample_examples(examples: list[EvalExample]) -> list[EvalExample]:
    """The guard's passages the stop scores (module docstring): 1-D int64 `input_ids`
    [<= SAMPLE_TOKENS] each, every token a label."""
    return [
        EvalExample(ex.input_ids[:SAMPLE_TOKENS], ex.labels[:SAMPLE_TOKENS], ex.kind) for ex in examples[::SAMPLE_EVERY]
    ]


@dataclass
class GuardStop:
    """Scores `examples` (`sample_examples` of the guard) on the base (`start`) and every
    `every_steps` steps of a run of `max_steps`; stops training past `limit_pct` at
    `patience` measurements in a row (module docstring).

    Attributes:
        base: the base model's score, None before `start`.
        changes: (step, percent change over the base) of every measurement, in order.
        safe_step: the step of the last measurement within the limit (0: the base).
        stopped_at: the step training was stopped after, None while it was not.
    """

    examples: list[EvalExample]
    every_steps: int
    max_steps: int  # the run's last step, measured while a pass of the limit is unconfirmed
    limit_pct: float
    pad_id: int
    precision: str = "float32"  # the run's dtype name (`dlm.train.precision`)
    patience: int = 1  # measurements past the limit in a row that stop the run
    base: GuardScore | None = None
    changes: list[tuple[int, float]] = field(default_factory=list)
    safe_step: int = 0
    stopped_at: int | None = None
    _safe_state: dict[str, Any] | None = None

    def start(self, base_model: Any) -> None:
        """Score the base model (before the adapter is made; a resumed run reads it back)."""
        if self.base is None:
            self.base = guard_score(base_model, self.examples, self.pad_id, self.precision)

    @property
    def passes(self) -> int:
        """The measurements past the limit since the last one within it."""
        count = 0
        for _, change in reversed(self.changes):
            if change <= self.limit_pct:
                break
            count += 1
        return count

    def due(self, step: int, max_steps: int) -> bool:
        """Every `every_steps` steps but the last; after the last too while a pass of the
        limit is unconfirmed (`dlm.train.loop.Measurement`; `max_steps` is the run's, the
        one this guard was made with)."""
        if step >= max_steps:
            return self.passes > 0
        return step % self.every_steps == 0

    def between_steps(self, model: Any, step: int) -> bool:
        """Score the adapter after `step`; True (stop) when its change has passed the
        limit at `patience` measurements in a row, or at the run's last step, after
        putting the last safe weights back."""
        if self.base is None:
            raise RuntimeError("GuardStop.start was not called with the base model")
        change = change_pct(self.base, guard_score(model, self.examples, self.pad_id, self.precision))
        self.changes.append((step, change))
        params = {n: p for n, p in model.named_parameters() if p.requires_grad}
        if change <= self.limit_pct:
            self.safe_step = step
            self._safe_state = {n: p.detach().clone() for n, p in params.items()}
            return False
        if self.passes < self.patience and step < self.max_steps:
            return False  # perhaps a transient: the next measurement decides
        import torch

        with torch.no_grad():
            for name, param in params.items():
                if self._safe_state is not None:
                    param.copy_(self._safe_state[name])
                elif "lora_B" in name:
                    param.zero_()  # LoRA's B starts at zero: the adapter adds nothing to the base
                elif "lora_A" not in name:  # A is read only through B
                    raise RuntimeError(f"no weights within the guard's limit to put back for {name}")
        self.stopped_at = step
        return True

    def summary(self) -> dict[str, Any]:
        """What the report keeps (`TrainReport.guard`): `limit_pct`, `patience`; `changes`, [step,
        percent] of every measurement (the sample's change over the base, not the
        report's general change); `stopped_at` and `kept_step` (0: the base) when it
        stopped the run, both None when training ran to its end."""
        return {
            "limit_pct": self.limit_pct,
            "patience": self.patience,
            "changes": [[step, round(change, 2)] for step, change in self.changes],
            "stopped_at": self.stopped_at,
            "kept_step": self.safe_step if self.stopped_at is not None else None,
        }

    def note(self) -> str | None:
        """One line for the user when training was stopped, else None."""
        if self.stopped_at is None:
            return None
        passed = [f"{change:+.2f}%" for _, change in self.changes[-self.passes :]]
        kept = f"the adapter of step {self.safe_step}" if self.safe_step else "no adapter update (the base model)"
        return (
            f"stopped after step {self.stopped_at}: general text scored {' then '.join(passed)} against the base, "
            f"past training.eval.general_max_increase ({self.limit_pct:g}%); kept {kept}. Lower learning_rate, "
            f"raise training.replay, or raise the limit"
        )

    def save(self, folder: Path) -> None:
        """Write the base score, the changes and the safe weights into a checkpoint `folder`."""
        from safetensors.torch import save_file

        from dlm.atomic import atomic_write_json

        base = None if self.base is None else [self.base.nll, self.base.passages, self.base.tokens]
        state = {"base": base, "changes": self.changes, "safe_step": self.safe_step, "stopped_at": self.stopped_at}
        atomic_write_json(folder / STATE_FILE, state)
        if self._safe_state is not None:
            save_file({k: v.contiguous() for k, v in self._safe_state.items()}, str(folder / SAFE_FILE))

    def load(self, folder: Path) -> None:
        """Read back what `save` wrote (nothing when the checkpoint has no guard file)."""
        import json

        from safetensors.torch import load_file

        path = folder / STATE_FILE
        if not path.exists():
            return
        state = json.loads(path.read_text(encoding="utf-8"))
        if state["base"] is not None:
            nll, passages, tokens = state["base"]
            self.base = GuardScore(float(nll), int(passages), int(tokens))
        self.changes = [(int(step), float(change)) for step, change in state["changes"]]
        self.safe_step, self.stopped_at = int(state["safe_step"]), state["stopped_at"]
        if (folder / SAFE_FILE).exists():
            self._safe_state = load_file(str(folder / SAFE_FILE))

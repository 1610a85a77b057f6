"""The values `dlm train` takes and gives: options, the progress sink, the report.

`TrainOptions` also travels to the ranks of a multi-process run as a JSON file
(`to_json` / `from_json`, written by `dlm.actions.training.ranks`), so the action layer
never spells the CLI's flags.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from dlm.lock import LockMode
from dlm.tokenize.seam import NullProgress, Progress
from dlm.train.lora import StepSink


@dataclass(frozen=True)
class TrainOptions:
    """Choices made outside the document (CLI flags, API arguments) that override or
    extend its `training:` section."""

    max_steps: int | None = None
    use_cache: bool = True
    strict_sources: bool = False
    lock_mode: LockMode | None = None  # None means the default mode
    cache_remote: str | None = None  # overrides $DLM_CACHE_REMOTE and training.cache.remote
    resume: bool = False  # continue the interrupted run from its latest checkpoint
    judge: bool = True  # False: no probe report at the end, whatever training.eval.judge says

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values (the lock mode by its value)."""
        data = asdict(self)
        data["lock_mode"] = self.lock_mode.value if self.lock_mode is not None else None
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainOptions:
        """The inverse of `to_json`. Raises KeyError/ValueError on a malformed mapping."""
        mode = data.get("lock_mode")
        return cls(
            max_steps=data.get("max_steps"),
            use_cache=bool(data.get("use_cache", True)),
            strict_sources=bool(data.get("strict_sources", False)),
            lock_mode=LockMode(mode) if mode is not None else None,
            cache_remote=data.get("cache_remote"),
            resume=bool(data.get("resume", False)),
            judge=bool(data.get("judge", True)),
        )


DEFAULT_OPTIONS = TrainOptions()  # frozen: safe to share as a default argument


class TrainSink(StepSink, Progress, Protocol):
    """Everything `train_document` reports while it runs (a structural type: any object
    with these methods is one)."""

    def on_message(self, text: str) -> None:
        """A warning the user should read (lock drift, a skipped file, a cache fallback)."""

    def on_note(self, text: str) -> None:
        """What the run decided or is doing (the recipe's steps, the evaluation); not a warning."""

    def on_plan(self, total_tokens: int) -> None:
        """Tokens the run will process (non-padding), known before step 1."""

    def on_eval(self, phase: str, step: int, result: Any) -> None:
        """A held-out loss measurement (`dlm.train.evaluate.EvalResult`)."""

    def on_kind_loss(self, step: int, losses: dict[str, float]) -> None:
        """Train loss per row kind (nats per loss token) over the window ending at
        `step`, just before that step's `on_step`."""


class NullSink(NullProgress):
    """A `TrainSink` that shows nothing."""

    def on_train_start(self, total_steps: int) -> None:
        pass

    def on_step(self, *args: Any) -> None:
        pass

    def on_message(self, text: str) -> None:
        pass

    def on_note(self, text: str) -> None:
        pass

    def on_plan(self, total_tokens: int) -> None:
        pass

    def on_eval(self, phase: str, step: int, result: Any) -> None:
        pass

    def on_kind_loss(self, step: int, losses: dict[str, float]) -> None:
        pass


@dataclass
class TrainReport:
    """The outcome of `dlm train`, as shown to the user (`--json` prints every field).

    Seconds are wall-clock: `train_seconds` the whole training loop, `step_seconds` its
    steps alone (less the held-out and probe measurements and checkpoints between them).
    `tokens_per_second` counts the tokens the model processed (padding excluded) per
    second of the steps. Of the tokens processed (padding included), `real_token_fraction`
    carried loss and `padding_fraction` was padding.
    """

    run_id: str
    dlm_id: str
    adapter_version: str
    adapter_dir: str
    adapter_sha256: str
    base_model: str
    base_model_revision: str
    steps: int
    train_loss: float | None
    train_tokens: int
    tokens_per_second: float | None
    train_seconds: float
    step_seconds: float
    rows: dict[str, int]
    files_taken: int
    files_skipped: dict[str, int]
    lossy_files: int
    examples: int
    tokenization: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    heldout: dict[str, Any] | None = None
    real_token_fraction: float | None = None
    padding_fraction: float | None = None
    loss_tokens: int | None = None  # tokens whose label was predicted (rank 0's micro-batches)
    distributed: dict[str, Any] | None = None
    rank: int = 0  # the rank that returned this report; only rank 0's names an adapter
    evaluation: dict[str, Any] | None = None  # the probe report (`dlm.judge.report.EvalReport`)
    resumed_from: str | None = None  # the checkpoint folder a `--resume` continued from
    kind_losses: dict[str, float] | None = None  # last logged train loss per row kind
    precision: str | None = None  # the dtype the steps ran in: `float32` or `bfloat16` (the lock has it too)
    accelerator_peak_bytes: int | None = (
        None  # peak GPU memory allocated by torch during the steps (bytes); None off CUDA
    )
    peak_rss_bytes: int | None = None  # this process's peak resident memory (bytes); None where the OS does not say
    guard: dict[str, Any] | None = None  # the early stop's measurements (`dlm.judge.guard_stop.GuardStop.summary`)


class KeptWarnings:
    """A `TrainSink` that passes every call on to `sink` and keeps each warning
    (`on_message`) in order, so a report carries what a quiet sink (`--json`) showed no
    one: a skipped source, a budget that cuts the synth's sightings, what
    `training.synth` left unread."""

    def __init__(self, sink: TrainSink) -> None:
        self.sink = sink
        self.warnings: list[str] = []

    def on_message(self, text: str) -> None:
        self.warnings.append(text)
        self.sink.on_message(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)

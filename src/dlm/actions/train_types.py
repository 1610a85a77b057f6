"""The values `dlm train` takes and gives: options, the progress sink, the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from dlm.lock import LockMode
from dlm.tokenize.seam import NullProgress, Progress
from dlm.train.lora import StepSink


@dataclass(frozen=True)
class TrainOptions:
    """Command-line choices that override or extend the document."""

    max_steps: int | None = None
    use_cache: bool = True
    strict_sources: bool = False
    lock_mode: LockMode | None = None  # None means the default mode
    cache_remote: str | None = None  # overrides $DLM_CACHE_REMOTE and training.cache.remote


class TrainSink(StepSink, Progress, Protocol):
    """Everything `train_document` reports while it runs (a structural type: any object
    with these methods is one)."""

    def on_message(self, text: str) -> None: ...

    def on_plan(self, total_tokens: int) -> None:
        """Tokens the run will process (non-padding), known before step 1."""

    def on_eval(self, phase: str, step: int, result: Any) -> None:
        """A held-out loss measurement (`dlm.train.evaluate.EvalResult`)."""


class NullSink(NullProgress):
    """A `TrainSink` that shows nothing."""

    def on_train_start(self, total_steps: int) -> None:
        pass

    def on_step(self, *args: Any) -> None:
        pass

    def on_message(self, text: str) -> None:
        pass

    def on_plan(self, total_tokens: int) -> None:
        pass

    def on_eval(self, phase: str, step: int, result: Any) -> None:
        pass


@dataclass
class TrainReport:
    """The outcome of `dlm train`, as shown to the user (`--json` prints every field)."""

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
    rows: dict[str, int]
    files_taken: int
    files_skipped: dict[str, int]
    lossy_files: int
    examples: int
    tokenization: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    heldout: dict[str, Any] | None = None
    real_token_fraction: float | None = None
    loss_tokens: int | None = None  # tokens whose label was predicted (rank 0's micro-batches)
    distributed: dict[str, Any] | None = None
    rank: int = 0  # the rank that returned this report; only rank 0's names an adapter

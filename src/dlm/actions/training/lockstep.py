"""The determinism lock around a run: built and checked before training (rank 0), written
after the adapter is published (`LockStep.finish`), and what `--resume` checks against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.actions.training.types import TrainSink
from dlm.cpu_isa import check_cpu_isa
from dlm.doc import Document
from dlm.errors import TrainingError
from dlm.lock import DeterminismFlags, DlmLock, LockDecision, LockInputs, LockMode
from dlm.models import BaseModelRef
from dlm.store import Store
from dlm.train.distributed import DistPlan
from dlm.train.lora import Hyperparameters


@dataclass(frozen=True)
class LockStep:
    """The determinism lock around a run: validated before training, written after."""

    store: Store
    current: DlmLock
    decision: LockDecision

    def finish(self, run_id: str, adapter_sha: str) -> None:
        """Write the lock for the published adapter, unless the mode says not to."""
        from dlm.lock import write_lock

        if self.decision.should_write:
            write_lock(self.store.root, self.current, run_id=run_id, adapter_sha256=adapter_sha)


def lock_inputs(
    doc: Document,
    ref: BaseModelRef,
    tokenizer_sha256: str,
    corpus: str,
    hyper: Hyperparameters,
    hashed: dict[str, Any],
    plan: DistPlan,
) -> LockInputs:
    """What the lock records of a run: the document, base model, tokenizer, corpus, the
    hashed training settings (`dlm.train.lora.lock_hyperparameters`) and the rank plan."""
    return LockInputs(
        dlm_id=doc.frontmatter.dlm_id,
        dlm_sha256=doc.dlm_sha256,
        base_model_name=ref.name,
        base_model_revision=ref.revision,
        precision=hyper.precision,
        seed=hyper.seed,
        tokenizer_sha256=tokenizer_sha256,
        corpus_fingerprint=corpus,
        hyperparameters=hashed,
        world_size=plan.world_size,
        per_device_batch_size=plan.per_device_batch_size,
        gradient_accumulation_steps=plan.gradient_accumulation_steps,
        backend=plan.backend,
    )


def check_run_lock(
    store: Store, inputs: LockInputs, flags: DeterminismFlags, mode: LockMode | None, sink: TrainSink
) -> LockStep:
    """Build this run's lock and check it against the store's (`dlm.lock.check_lock`);
    warnings go to `sink`.

    Raises:
        LockValidationError: the lock's policy refuses the run (`--strict-lock`, a new base).
    """
    from dlm.lock import build_lock, check_lock

    current = build_lock(inputs, flags)
    isa_warning = check_cpu_isa(current.cpu_capability)
    decision = check_lock(store.root, current, mode or LockMode.DEFAULT)
    for warning in [isa_warning, *decision.warnings] if isa_warning else decision.warnings:
        sink.on_message(warning)
    return LockStep(store, current, decision)


def resume_point(store: Store, run_id: str, lock: LockStep | None) -> Path:
    """The latest checkpoint of interrupted run `run_id`, after checking that the
    document, its rows and the hyperparameters are those it was started with.

    Raises:
        TrainingError: nothing to resume, or what the run is changed (one line).
    """
    from dlm.train.checkpoint import latest_checkpoint, resume_refusal

    folder = store.adapter_root / f".staging-{run_id}" / "checkpoints"
    found = latest_checkpoint(folder)
    if found is None or lock is None:
        raise TrainingError(f"nothing to resume for run {run_id}; run `dlm train` without --resume")
    refusal = resume_refusal(folder, run_id, lock.current)
    if refusal:
        raise TrainingError(refusal)
    return found

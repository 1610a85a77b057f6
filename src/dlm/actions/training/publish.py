"""Train a prepared run and publish it: rank 0 records metrics, saves, commits the
adapter version and has the store record it and the lock written; any other rank only
trains its shard and writes nothing. The training itself is `dlm.train.loop.train`.

Ctrl-C (or a failure) before the version is committed empties the staging folder but
for the run's latest complete checkpoint (`dlm.train.checkpoint`, every
`training.checkpoint_every`), marks the metrics row `interrupted` (or `failed`) with the
checkpoint's folder, and leaves the previous adapter current; `dlm train --resume`
continues from that checkpoint. Each logged step also records the train loss per row
kind.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dlm.actions.training.plan import PreparedRun
from dlm.actions.training.report import build_report, tokenization_record
from dlm.actions.training.types import NullSink, TrainReport, TrainSink
from dlm.lock.schema import lock_to_json
from dlm.metrics import MetricsDB, RunRecord
from dlm.models import load_model
from dlm.train.base_score import BaseScoreMemo, eval_set_sha256, model_identity, score_key, scoring_environment
from dlm.train.checkpoint import checkpoint_step, latest_checkpoint, write_run_file
from dlm.train.data import KINDS
from dlm.train.evaluate import build_eval_set
from dlm.train.heldout import subset
from dlm.train.loop import LoopRun, Measurement, train
from dlm.train.lora import LoraResult
from dlm.train.precision import hold_frozen_embeddings, training_device
from dlm.train.tracking import HeldOutTracker
from dlm.train.workload import step_tokens

if TYPE_CHECKING:
    from dlm.judge.guard_stop import GuardStop
    from dlm.judge.track import ProbeTracker


def train_and_publish(run: PreparedRun, sink: TrainSink) -> TrainReport:
    """Rank 0 (or the one process): score, train, save, publish, record (module docstring).

    Raises:
        KeyboardInterrupt, StoppedByLauncher, any training error: after removing the
            staging folder and recording the run as interrupted or failed; the store's
            `current` adapter is unchanged.
    """
    with MetricsDB(run.store.metrics_path) as metrics:
        staging = _open_run(run, metrics, sink)
        checkpoints = staging / "checkpoints"
        recorder = _StepRecorder(metrics, run.run_id, sink)
        view = loop_run(run, checkpoints, metrics)
        sink.on_plan(int(step_tokens(view).sum()))
        try:
            model = load_model(run.ref, device=training_device())  # scored where it trains
            # the base model is scored with the embedding lookups the steps will use
            hold_frozen_embeddings(model, run.hyper.precision)
            heldout = _heldout_tracker(run, metrics, sink, model)
            heldout.measure(model, "before", 0)
            probes = _probe_tracker(run, metrics)
            guard = _guard_stop(run, model)
            measurements: list[Measurement] = [heldout, *([probes] if probes else []), *([guard] if guard else [])]
            result = train(model, view, recorder, measurements)
            stopped = guard.note() if guard is not None else None
            if stopped is not None:
                sink.on_note(stopped)
            if probes is not None and probes.restore_best(result.model, result.steps):
                sink.on_note(
                    f"kept the adapter of step {probes.best_step}: its answers scored best "
                    f"({probes.best_score:.3f} against {probes.scores[-1][1]:.3f} at step {result.steps})"
                )
            heldout.measure(result.model, "after", result.steps)
            shutil.rmtree(checkpoints, ignore_errors=True)
            version, adapter_dir, sha = _commit(run, result, staging)
        except BaseException as exc:
            _record_failure(run, metrics, sink, exc, staging, recorder.last_step)
            raise
        rate = _rate(result)
        metrics.finish_run(
            run.run_id,
            RunRecord(
                "completed",
                result.steps,
                result.train_loss,
                rate,
                version,
                result.tokens_seen,
                result.real_token_fraction,
            ),
        )
        metrics.set_checkpoint(run.run_id, None)
    del model  # its frozen weights may be bfloat16: the judge loads a fresh float32 base
    result = replace(result, model=None)
    report = _report(run, result, version, adapter_dir, sha, heldout, recorder, sink, [stopped] if stopped else [])
    report.guard = guard.summary() if guard is not None else None
    return report


def _open_run(run: PreparedRun, metrics: MetricsDB, sink: TrainSink) -> Path:
    """Start (or resume) the run's metrics row; returns its staging folder, with the run
    file beside the checkpoints when checkpoints are on."""
    if run.resume_from is not None:
        metrics.resume_run(run.run_id)
        staging = run.store.resume_staging_dir(run.run_id)
        sink.on_message(f"resuming run {run.run_id} from {run.resume_from.name}")
    else:
        _note_discarded(run, sink)
        metrics.start_run(
            run.run_id,
            base_model=run.ref.name,
            max_steps=run.hyper.max_steps,
            rows=len(run.tokenized),
            files_taken=run.tokenized.files_taken,
            files_skipped=run.files_skipped,
            heldout_rows=int(run.split.heldout.shape[0]),
        )
        staging = run.store.new_staging_dir(run.run_id)
    metrics.log_tokenization(run.run_id, tokenization_record(run.tokenized))
    if run.training.parsed_checkpoint_every is not None:
        assert run.lock is not None  # rank 0 always prepares the lock
        write_run_file(staging / "checkpoints", run.run_id, lock_to_json(run.lock.current))
    return staging


def loop_run(run: PreparedRun, checkpoints: Path | None, metrics: MetricsDB | None) -> LoopRun:
    """The loop's view of `run` (`dlm.train.loop.LoopRun`); `checkpoints` and `metrics`
    (which records each checkpoint) only on rank 0."""
    every = run.training.parsed_checkpoint_every if checkpoints is not None else None
    row_kinds = np.fromiter((KINDS.index(k) for k in run.dataset.rows.kinds), dtype=np.int64)

    def saved(step: int, path: Path) -> None:
        if metrics is not None:
            metrics.set_checkpoint(run.run_id, str(path))

    return LoopRun(
        hyper=run.hyper,
        dataset=run.dataset,
        row_kinds=row_kinds,
        sequence_len=run.training.sequence_len,
        pad_id=_pad_id(run.tokenizer),
        rank=run.rank,
        world_size=run.plan.world_size,
        checkpoints=checkpoints if every is not None else None,
        every=every,
        resume_from=run.resume_from,
        on_checkpoint=saved,
    )


def _commit(run: PreparedRun, result: LoraResult, staging: Path) -> tuple[str, Path, str]:
    """Save the trained adapter into `staging` and commit it as the next version; returns
    (version, its folder, its sha256)."""
    from dlm.lock import adapter_sha256, canonicalize_adapter_dir

    result.model.save_pretrained(staging)
    canonicalize_adapter_dir(staging, base_model_name=run.ref.name)
    sha = adapter_sha256(staging)
    version, adapter_dir = run.store.commit_version(staging)
    return version, adapter_dir, sha


def _record_failure(
    run: PreparedRun, metrics: MetricsDB, sink: TrainSink, exc: BaseException, staging: Path, last_step: int
) -> None:
    """Keep the latest checkpoint, say what happened, and mark the run in metrics."""
    kept = _keep_checkpoint(staging, staging / "checkpoints")
    status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
    where = (
        f"; its checkpoint at step {checkpoint_step(kept)} is kept ({kept}): `dlm train --resume` continues it"
        if kept
        else ""
    )
    sink.on_message(f"run {run.run_id} {status} at step {last_step}: the previous adapter stays current{where}")
    metrics.finish_run(run.run_id, RunRecord(status, last_step, None, None, None))
    metrics.set_checkpoint(run.run_id, str(kept) if kept else None)


def _report(
    run: PreparedRun,
    result: LoraResult,
    version: str,
    adapter_dir: Path,
    sha: str,
    heldout: HeldOutTracker,
    recorder: _StepRecorder,
    sink: TrainSink,
    stops: list[str],
) -> TrainReport:
    """Record the version and the lock, judge the adapter, and build the run's report
    (`stops`: why training ended early, among its warnings)."""
    run.store.record_adapter(
        version=version,
        run_id=run.run_id,
        adapter_sha256=sha,
        base_model=run.ref.name,
        base_model_revision=run.ref.revision,
        document_path=run.doc.path,
    )
    assert run.lock is not None  # rank 0 always prepares the lock
    run.lock.finish(run.run_id, sha)
    warnings = [*run.lock.decision.warnings, *stops]
    evaluation = _judge(run, adapter_dir, version, sink)
    if evaluation is not None:
        warnings += evaluation["warnings"]
    report = build_report(
        run,
        result,
        version=version,
        adapter_dir=str(adapter_dir),
        sha=sha,
        warnings=warnings,
        heldout=heldout.summary(),
        evaluation=evaluation,
    )
    report.resumed_from = str(run.resume_from) if run.resume_from is not None else None
    report.tokens_per_second = _rate(result)
    report.kind_losses = recorder.last_kinds
    return report


def _pad_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else int(tokenizer.eos_token_id)


def _scoring_pad_id(tokenizer: Any) -> int:
    """The id the scorers pad with (the held-out set, the probes and the guard, as the
    report's guard does, `dlm.judge.report`); padded positions are masked, so it only
    has to be a valid id."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0


def _rate(result: LoraResult) -> float | None:
    """Tokens per second of this process's training steps; a resumed run's tokens count
    from its checkpoint on, as its clock does."""
    return result.tokens_per_second


def _keep_checkpoint(staging: Path, checkpoints: Path) -> Path | None:
    """After a failed or interrupted run: keep the latest complete checkpoint and remove
    the rest of `staging` (the whole folder when there is none)."""
    kept = latest_checkpoint(checkpoints)
    if kept is None:
        shutil.rmtree(staging, ignore_errors=True)
        return None
    for path in staging.iterdir():
        if path != checkpoints:
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
    return kept


def _note_discarded(run: PreparedRun, sink: TrainSink) -> None:
    """Say so when a fresh run is about to remove an interrupted run's checkpoint."""
    for staging in run.store.staging_dirs():
        found = latest_checkpoint(staging / "checkpoints")
        if found is not None:
            sink.on_message(
                f"starting afresh: the checkpoint of interrupted run {staging.name[len('.staging-') :]} "
                f"(step {checkpoint_step(found)}) is discarded; `dlm train --resume` would have "
                "continued it"
            )


def _judge(run: PreparedRun, adapter_dir: Path, version: str, sink: TrainSink) -> dict[str, Any] | None:
    """The probe report of the adapter just published in `adapter_dir`
    (`dlm.actions.evaluating`), loaded on a fresh float32 base model exactly as `dlm eval`
    loads it, and recorded in metrics; None when `training.eval.judge` or the caller
    turned it off, or there is nothing to score.
    The version is already committed: an interrupt here loses only the report."""
    from dlm.actions.evaluating import base_side_memo, eval_items, judge_trained, scored_adapter, summary_of

    if not run.judge:
        return None
    items = eval_items(run.doc, run.tokenizer, run.probes)
    if not items:
        return None
    sink.on_note(f"evaluating {len(items)} questions on the base model, the adapter and a null adapter")
    model = scored_adapter(run.ref, adapter_dir)
    memo = base_side_memo(run.store, run.ref, model, run.tokenizer)
    report = judge_trained(run.doc, model, run.tokenizer, run.probes, version, memo, run.store)
    with MetricsDB(run.store.metrics_path) as metrics:
        metrics.log_judgement(
            run_id=run.run_id, adapter_version=version, phase="final", step=None, summary=summary_of(report)
        )
    return report.as_dict()


def train_as_peer(run: PreparedRun) -> TrainReport:
    """A rank other than 0: train its shard of every step and write nothing; the report
    (no adapter, `rank` > 0) goes only to this machine's launcher when it is the first rank here."""
    result = train(load_model(run.ref, device=training_device()), loop_run(run, None, None), NullSink())
    return build_report(run, result)


def _heldout_tracker(run: PreparedRun, metrics: MetricsDB, sink: TrainSink, model: Any) -> HeldOutTracker:
    """The held-out measurements of `run` (inactive when nothing is held out). The score
    of `model`, the freshly loaded base model, is remembered in the store for the next
    run with the same inputs (`dlm.train.base_score`)."""
    training = run.training
    eval_set = build_eval_set(subset(run.tokenized, run.split.scored), training.sequence_len)
    pad_id = _scoring_pad_id(run.tokenizer)
    memo = None
    if eval_set.rows:
        key = score_key(
            model_identity(run.ref.revision, run.ref.path, str(model.dtype)),
            eval_set_sha256(eval_set, pad_id),
            scoring_environment(),
            run.hyper.precision,
        )
        memo = BaseScoreMemo(run.store.heldout_base_path, key)
    return HeldOutTracker(
        eval_set, metrics, run.run_id, sink, training.eval.every_steps, pad_id, memo, run.hyper.precision
    )


def _guard_stop(run: PreparedRun, base_model: Any) -> GuardStop | None:
    """The early stop on the general-ability guard (`dlm.judge.guard_stop`), its base
    score taken now from `base_model`: on one process (a stop must be every rank's, and
    the weights put back everywhere), with `training.eval.guard_stop` and at least
    `MIN_STEPS` steps."""
    from dlm.actions.evaluating import general_texts
    from dlm.judge.guard import guard_examples
    from dlm.judge.guard_stop import MEASUREMENTS, MIN_STEPS, GuardStop, sample_examples

    settings = run.training.eval
    steps = run.hyper.max_steps
    if run.plan.world_size > 1 or not settings.guard_stop or not steps or steps < MIN_STEPS:
        return None
    examples = sample_examples(guard_examples(run.tokenizer, general_texts()))
    guard = GuardStop(
        examples,
        steps // MEASUREMENTS,
        steps,
        settings.general_max_increase,
        _scoring_pad_id(run.tokenizer),
        run.hyper.precision,
        settings.guard_patience,
    )
    guard.start(base_model)
    return guard


def _probe_tracker(run: PreparedRun, metrics: MetricsDB) -> ProbeTracker | None:
    """The probes' score during training (`dlm.judge.track`), on one process with at
    least one probe: the probes and the instruction pairs (transfer and recall), every
    `every_steps` steps (default: at each quarter of the run, for the curve `dlm metrics
    --plot` draws; eighth, with `training.eval.keep_best`, which needs scores to
    compare within its patience); the best weights kept and the early
    stop only with `training.eval.keep_best`. None when the run ends without the probe
    report (`training.eval.judge` or the caller) and keeps no best adapter: nobody reads it."""
    from dlm.actions.evaluating import eval_items
    from dlm.judge.score import reference_examples
    from dlm.judge.track import ProbeTracker

    settings = run.training.eval
    if run.plan.world_size > 1 or not run.probes or not run.hyper.max_steps:
        return None
    if not run.judge and not settings.keep_best:
        return None
    items = eval_items(run.doc, run.tokenizer, run.probes)
    every = settings.every_steps or max(1, run.hyper.max_steps // (8 if settings.keep_best else 4))
    pad_id = _scoring_pad_id(run.tokenizer)

    def record(step: int, value: float) -> None:
        metrics.log_judgement(
            run_id=run.run_id,
            adapter_version=None,
            phase="step",
            step=step,
            summary={"answer_logprob": round(value, 4)},
        )

    return ProbeTracker(
        reference_examples(run.tokenizer, items),
        every,
        pad_id,
        settings.patience,
        settings.keep_best,
        record,
        precision=run.hyper.precision,
    )


class _StepRecorder:
    """Writes each logged step (and its loss per row kind) to metrics and forwards it
    to the user's sink."""

    def __init__(self, metrics: MetricsDB, run_id: str, sink: TrainSink) -> None:
        self.metrics, self.run_id, self.sink, self.last_step = metrics, run_id, sink, 0
        self.last_kinds: dict[str, float] | None = None

    def on_kind_losses(self, step: int, losses: dict[str, tuple[float, int]]) -> None:
        self.metrics.log_kind_losses(self.run_id, step, losses)
        self.last_kinds = {kind: loss for kind, (loss, _) in losses.items()}
        self.sink.on_kind_loss(step, self.last_kinds)

    def on_train_start(self, total_steps: int) -> None:
        self.sink.on_train_start(total_steps)

    def on_step(
        self,
        step: int,
        loss: float | None,
        tokens_per_second: float | None,
        learning_rate: float | None,
        tokens_seen: int,
        seconds: float,
    ) -> None:
        self.last_step = step
        self.metrics.log_step(
            self.run_id, step, loss=loss, learning_rate=learning_rate, tokens_seen=tokens_seen, seconds=seconds
        )
        self.sink.on_step(step, loss, tokens_per_second, learning_rate, tokens_seen, seconds)

"""Train a prepared run and publish it: rank 0 records metrics, saves, commits the
adapter version and writes manifest and lock; any other rank only trains its shard.

`PreparedRun` is everything `dlm.actions.training` decided before training; nothing in
the store has changed when it is built.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from dlm.actions.train_types import NullSink, TrainReport, TrainSink
from dlm.doc import Document
from dlm.metrics import MetricsDB, RunRecord, TokenizationRecord
from dlm.models import BaseModelRef, load_model
from dlm.store import Store
from dlm.tokenize.seam import TokenizedRows
from dlm.train.base_score import BaseScoreMemo, eval_set_sha256, model_identity, score_key, scoring_environment
from dlm.train.dataset import PackedDataset, WindowDataset, as_hf_dataset
from dlm.train.distributed import DistPlan
from dlm.train.evaluate import build_eval_set
from dlm.train.heldout import Split, subset
from dlm.train.lora import LoraRun, train_lora
from dlm.train.tracking import HeldOutTracker, TokenTally, planned_tokens


def _row_counts(tokenized: TokenizedRows) -> dict[str, int]:
    counts: dict[str, int] = {"prose": 0, "instruction": 0, "source": 0}
    for kind in tokenized.kinds:
        counts[kind] += 1
    return counts


@dataclass(frozen=True)
class PreparedRun:
    """Everything decided before training starts; the store is not yet changed."""

    doc: Document
    store: Store
    ref: BaseModelRef
    tokenizer: Any
    tokenized: TokenizedRows
    dataset: WindowDataset | PackedDataset
    lora_run: LoraRun
    run_id: str
    files_skipped: dict[str, int]
    lock: Any  # dlm.actions.training._LockStep; None on ranks other than 0 (they never write the lock)
    split: Split
    plan: DistPlan
    ranks: list[dict[str, Any]]  # each rank's tokenization (`dlm.actions.ranks.rank_entry`)
    rank: int = 0


def train_and_publish(run: PreparedRun, sink: TrainSink) -> TrainReport:
    """Rank 0 (or the one process): score, train, save, publish, record (module docstring).

    Raises:
        KeyboardInterrupt, StoppedByLauncher, any training error: after removing the
            staging folder and recording the run as interrupted or failed; the store's
            `current` adapter is unchanged.
    """
    from dlm.lock import adapter_sha256, canonicalize_adapter_dir

    tokenization = _tokenization(run.tokenized)
    with MetricsDB(run.store.metrics_path) as metrics:
        metrics.start_run(run.run_id, base_model=run.ref.name, max_steps=run.lora_run.max_steps,
                          rows=len(run.tokenized), files_taken=run.tokenized.files_taken,
                          files_skipped=run.files_skipped, heldout_rows=int(run.split.heldout.shape[0]))
        metrics.log_tokenization(run.run_id, tokenization)
        staging = run.store.new_staging_dir(run.run_id)
        recorder = _StepRecorder(metrics, run.run_id, sink)
        tally = TokenTally()
        sink.on_plan(planned_tokens(run.dataset, run.lora_run.max_steps, run.lora_run.batch_size
                                    * run.lora_run.gradient_accumulation_steps * run.plan.world_size,
                                    run.lora_run.num_epochs))
        try:
            model = load_model(run.ref)
            heldout = _heldout_tracker(run, metrics, sink, model)
            heldout.measure(model, "before", 0)
            result = train_lora(model, run.tokenizer, as_hf_dataset(run.dataset, tally.on_batch),
                                run.lora_run, staging / "trainer", recorder, callbacks=heldout.callbacks(),
                                sequence_len=run.doc.frontmatter.training.sequence_len)
            heldout.measure(result.model, "after", result.steps)
            shutil.rmtree(staging / "trainer", ignore_errors=True)
            result.model.save_pretrained(staging)
            canonicalize_adapter_dir(staging, base_model_name=run.ref.name)
            sha = adapter_sha256(staging)
            version, adapter_dir = run.store.commit_version(staging)
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            sink.on_message(f"run {run.run_id} {status}: the previous adapter stays current")
            metrics.finish_run(run.run_id, RunRecord(status, recorder.last_step, None, None, None))
            raise
        metrics.finish_run(run.run_id, RunRecord(
            "completed", result.steps, result.train_loss, result.tokens_per_second, version,
            result.tokens_seen, tally.fraction))
    _record_manifest(run, version, sha)
    assert run.lock is not None  # rank 0 always prepares the lock
    run.lock.finish(run.run_id, sha)
    return TrainReport(
        run_id=run.run_id, dlm_id=run.doc.frontmatter.dlm_id, adapter_version=version,
        adapter_dir=str(adapter_dir), adapter_sha256=sha, base_model=run.ref.name,
        base_model_revision=run.ref.revision, steps=result.steps, train_loss=result.train_loss,
        train_tokens=result.tokens_seen, tokens_per_second=result.tokens_per_second,
        train_seconds=result.seconds, rows=_row_counts(run.tokenized),
        files_taken=run.tokenized.files_taken, files_skipped=run.files_skipped,
        lossy_files=run.tokenized.lossy_files, examples=len(run.dataset),
        tokenization=asdict(tokenization),
        warnings=list(run.lock.decision.warnings) if run.lock else [],
        heldout=heldout.summary(), real_token_fraction=tally.fraction, loss_tokens=tally.loss_tokens,
        distributed=_distributed_summary(run),
    )


def _tokenization(tokenized: TokenizedRows) -> TokenizationRecord:
    stats = tokenized.stats
    return TokenizationRecord(stats.total_rows, stats.cache_hits, stats.cache_misses, stats.seconds,
                              stats.cache_bytes_after)


def _distributed_summary(run: PreparedRun) -> dict[str, Any] | None:
    """The plan and each rank's tokenization (None for one process)."""
    if run.plan.world_size == 1:
        return None
    return {"world_size": run.plan.world_size, "per_device_batch_size": run.plan.per_device_batch_size,
            "gradient_accumulation_steps": run.plan.gradient_accumulation_steps, "backend": run.plan.backend,
            "ranks": run.ranks}


def train_as_peer(run: PreparedRun) -> TrainReport:
    """A rank other than 0: train its shard of every step and write nothing; the report
    (no adapter, `rank` > 0) goes only to this machine's launcher when it is the first rank here."""
    with tempfile.TemporaryDirectory(prefix="dlm-rank-") as scratch:  # the trainer's output_dir; never the store
        result = train_lora(load_model(run.ref), run.tokenizer, as_hf_dataset(run.dataset), run.lora_run,
                            Path(scratch), NullSink(), sequence_len=run.doc.frontmatter.training.sequence_len)
    return TrainReport(
        run_id=run.run_id, dlm_id=run.doc.frontmatter.dlm_id, adapter_version="", adapter_dir="",
        adapter_sha256="", base_model=run.ref.name, base_model_revision=run.ref.revision, steps=result.steps,
        train_loss=result.train_loss, train_tokens=result.tokens_seen, tokens_per_second=result.tokens_per_second,
        train_seconds=result.seconds, rows=_row_counts(run.tokenized), files_taken=run.tokenized.files_taken,
        files_skipped=run.files_skipped, lossy_files=run.tokenized.lossy_files, examples=len(run.dataset),
        tokenization=asdict(_tokenization(run.tokenized)), distributed=_distributed_summary(run), rank=run.rank,
    )


def _heldout_tracker(run: PreparedRun, metrics: MetricsDB, sink: Any, model: Any) -> HeldOutTracker:
    """The held-out measurements of `run` (inactive when nothing is held out). The score
    of `model`, the freshly loaded base model, is remembered in the store for the next
    run with the same inputs (`dlm.train.base_score`)."""
    training = run.doc.frontmatter.training
    eval_set = build_eval_set(subset(run.tokenized, run.split.scored), training.sequence_len)
    pad_id = run.tokenizer.pad_token_id if run.tokenizer.pad_token_id is not None else 0
    memo = None
    if eval_set.rows:
        key = score_key(model_identity(run.ref.revision, run.ref.path, str(model.dtype)),
                        eval_set_sha256(eval_set, pad_id), scoring_environment())
        memo = BaseScoreMemo(run.store.heldout_base_path, key)
    return HeldOutTracker(eval_set, metrics, run.run_id, sink, training.eval.every_steps, pad_id, memo)


class _StepRecorder:
    """Writes each logged step to metrics and forwards it to the user's sink."""

    def __init__(self, metrics: MetricsDB, run_id: str, sink: TrainSink) -> None:
        self.metrics, self.run_id, self.sink, self.last_step = metrics, run_id, sink, 0

    def on_train_start(self, total_steps: int) -> None:
        self.sink.on_train_start(total_steps)

    def on_step(self, step: int, loss: float | None, tokens_per_second: float | None,
                learning_rate: float | None, tokens_seen: int, seconds: float) -> None:
        self.last_step = step
        self.metrics.log_step(self.run_id, step, loss=loss, learning_rate=learning_rate,
                              tokens_seen=tokens_seen, seconds=seconds)
        self.sink.on_step(step, loss, tokens_per_second, learning_rate, tokens_seen, seconds)


def _record_manifest(run: PreparedRun, version: str, sha: str) -> None:
    manifest = run.store.read_manifest()
    manifest.update(
        dlm_id=run.doc.frontmatter.dlm_id,
        document_path=str(run.doc.path.resolve()) if run.doc.path else None,
        base_model={"name": run.ref.name, "revision": run.ref.revision},
        current_version=version,
    )
    manifest.setdefault("adapters", []).append({
        "version": version, "run_id": run.run_id, "adapter_sha256": sha,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    })
    run.store.write_manifest(manifest)

"""`dlm train`: from a document to a new adapter version, as one library call (`train`).

Order of work (each step can fail cleanly before the next touches the store):
1. resolve the base model and its tokenizer, fingerprint the tokenizer;
2. take the store's writer lock (a second train on the document fails at once);
3. build rows (walk sources) and tokenize them through the seam (cache or plain), then
   set the held-out rows aside (`dlm.train.heldout`);
4. check the determinism lock (before any compute is spent on training);
5. score the held-out rows on the base model, train LoRA into a staging folder, score
   them again, save the adapter there, make it canonical;
6. publish it as the next version, then record manifest, metrics and lock.
Ctrl-C at any point before 6 leaves the previous adapter current and intact; the
metrics row of the run is marked `interrupted`.

On several ranks (started by `--nproc`, torchrun or accelerate; `dlm.actions.ranks`)
every rank runs this same order with three differences: the tokenize step runs in turns
(rank 0 first, `dlm.train.distributed.in_turns`), so the others read the rows it cached;
the ranks check they hold the same document and corpus; and only rank 0 takes the
writer lock and writes the store (adapter, manifest, metrics, lock).
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from ulid import ULID

from dlm.actions.common import DocPath, open_document
from dlm.actions.publishing import PreparedRun, train_and_publish, train_as_peer
from dlm.actions.ranks import cache_run_id, check_agreement, launch_train, rank_entry, run_id_for, write_report
from dlm.actions.train_types import NullSink, TrainOptions, TrainReport, TrainSink
from dlm.doc import Document
from dlm.doc.schema import TrainingConfig
from dlm.errors import DlmError, TrainingError
from dlm.isa import check_cpu_isa
from dlm.lock import DlmLock, LockDecision, LockMode, resolve_lock_mode
from dlm.models import BaseModelRef, resolve_base_model
from dlm.rows.build import build_rows
from dlm.rows.walk import format_skips
from dlm.store import Store, open_store
from dlm.tokenize.deferred import deferred_tokenizer
from dlm.tokenize.keys import corpus_fingerprint
from dlm.tokenize.plain import PlainRowTokenizer
from dlm.tokenize.seam import RowTokenizer, TokenizedRows
from dlm.train.dataset import build_dataset
from dlm.train.distributed import (
    REPORT_ENV,
    DistPlan,
    RankGroup,
    RankInfo,
    StoppedByLauncher,
    launcher_signals,
    make_plan,
    rank_error_message,
    write_rank_error,
)
from dlm.train.heldout import split_rows, subset
from dlm.train.launch import LaunchSpec
from dlm.train.lora import LoraRun, lock_hyperparameters
from dlm.train.precision import resolve_precision

__all__ = [
    "LaunchSpec", "NullSink", "TrainOptions", "TrainReport", "TrainSink", "format_skips", "resolve_lock_mode", "train",
    "train_document",
]


def lora_run_for(training: TrainingConfig, options: TrainOptions) -> LoraRun:
    """The LoRA hyperparameters of a run: the document's `training:` with CLI overrides."""
    max_steps = options.max_steps if options.max_steps is not None else training.max_steps
    return LoraRun(
        lora_r=training.lora_r,
        lora_alpha=training.lora_alpha,
        lora_dropout=training.lora_dropout,
        target_modules=tuple(sorted(training.target_modules)),
        learning_rate=training.learning_rate,
        max_steps=max_steps,
        num_epochs=training.effective_epochs,
        batch_size=training.batch_size,
        gradient_accumulation_steps=training.gradient_accumulation_steps,
        seed=training.seed,
        precision=resolve_precision(training.precision),
    )


def make_row_tokenizer(
    store: Store, tokenizer: Any, tok_sha: str, training: TrainingConfig, run_id: str, use_cache: bool,
    base_dir: Path | None = None, cache_remote: str | None = None,
) -> RowTokenizer:
    """The seam implementation for this run: the section cache (shared store, remote
    tier when configured) unless disabled."""
    if use_cache and training.cache.enabled:
        from dlm.cache import CachedRowTokenizer
        from dlm.cache.remote import resolve_remote
        from dlm.paths import cache_store_dir

        return CachedRowTokenizer(
            store.cache_dir, tokenizer, tok_sha, max_bytes=training.cache.max_bytes, run_id=run_id,
            trust_stat=training.cache.trust_stat, store_dir=cache_store_dir(), doc_id=store.dlm_id,
            remote=resolve_remote(training.cache.remote, cache_remote, base_dir),
            sibling_dirs=store.sibling_cache_dirs(),
        )
    return PlainRowTokenizer(tokenizer, tok_sha)


def train(
    path: DocPath,
    *,
    max_steps: int | None = None,
    use_cache: bool = True,
    strict_sources: bool = False,
    lock_mode: LockMode | None = None,
    sink: TrainSink | None = None,
    cache_remote: str | None = None,
    nproc: int | None = None,
    launch: LaunchSpec | None = None,
) -> TrainReport:
    """Train a new adapter version for the `.dlm` document at `path`.

    Args:
        max_steps: overrides `training.max_steps`.
        use_cache: False bypasses the tokenized-section cache without touching it.
        strict_sources: refuse source symlinks that leave their root (else skipped).
        lock_mode: a `dlm.lock.LockMode` (None: the default, warn on drift).
        sink: a `TrainSink` for progress and messages (None: silent).
        cache_remote: the cache's remote tier (a folder or fsspec URL); overrides
            `$DLM_CACHE_REMOTE` and `training.cache.remote`.
        nproc: ranks on this machine (default `training.nproc`, else 1); more than one
            starts them through torch's launcher (`dlm.actions.ranks`); `sink` then sees
            nothing until rank 0's report (each rank's output is in its log file).
        launch: the full `LaunchSpec` (several machines, an accelerate config); overrides
            `nproc`. Both are ignored inside a rank (`WORLD_SIZE` set by a launcher).

    Returns:
        The `TrainReport` that `dlm train` renders (`--json` prints it).

    Raises:
        DocError, BaseModelError, SourceError, StoreError, LockValidationError, TrainingError:
            each before the store changes.
        RankFailed: a rank of a multi-process run failed (`rank N: cause`).
        KeyboardInterrupt: after marking the run interrupted; the store is unchanged.
    """
    doc, _ = open_document(path)
    options = TrainOptions(max_steps=max_steps, use_cache=use_cache, strict_sources=strict_sources,
                           lock_mode=lock_mode, cache_remote=cache_remote)
    if launch is None:
        launch = LaunchSpec(nproc or doc.frontmatter.training.nproc or 1)
    if (launch.nproc > 1 or launch.nnodes > 1) and not RankInfo.from_env().distributed:
        return launch_train(Path(path), options, launch)
    return train_document(doc, options, sink)


def train_document(
    doc: Document, options: TrainOptions = TrainOptions(), sink: TrainSink | None = None
) -> TrainReport:
    """Train a new adapter version for `doc` (a `dlm.doc.Document`).

    Raises:
        BaseModelError, SourceError, StoreError, LockValidationError, TrainingError:
            each before the store changes.
        KeyboardInterrupt: after marking the run interrupted; the store is unchanged.
    """
    info = RankInfo.from_env()
    sink = sink if sink is not None and info.is_main else NullSink()
    with launcher_signals(info):
        try:
            return _train_rank(doc, options, sink, info)
        except DlmError as exc:
            message = str(exc) if str(exc).startswith("rank ") else rank_error_message(info, str(exc))
            write_rank_error(message)
            if info.distributed and message != str(exc):
                raise TrainingError(message) from exc
            raise
        except (Exception, StoppedByLauncher) as exc:
            write_rank_error(rank_error_message(info, f"{type(exc).__name__}: {exc}"))
            raise


def _train_rank(doc: Document, options: TrainOptions, sink: TrainSink, info: RankInfo) -> TrainReport:
    fm = doc.frontmatter
    training = fm.training
    base_dir = doc.path.parent if doc.path else None
    ref = resolve_base_model(fm.base_model, relative_to=base_dir)
    plan = make_plan(info.world_size, training.batch_size, training.gradient_accumulation_steps,
                     "cuda" if _cuda() else "cpu")
    group = RankGroup(info, plan.device)
    run_id = run_id_for(group, str(ULID()))
    deferred, tok_sha = deferred_tokenizer(ref)  # the fingerprint from the memo when the folder is unchanged
    tokenizer = deferred.load()
    store = open_store(fm.dlm_id)
    with store.train_lock() if info.is_main else nullcontext():
        def rows_and_ids() -> tuple[Any, TokenizedRows, RowTokenizer]:
            built = build_rows(doc, tokenizer, strict=options.strict_sources)
            row_tokenizer = make_row_tokenizer(store, tokenizer, tok_sha, training, cache_run_id(info, run_id),
                                               options.use_cache, base_dir, options.cache_remote)
            return built, row_tokenizer.tokenize(built.rows, sink), row_tokenizer

        (built, tokenized, row_tokenizer), waited, ready = group.in_turns(rows_and_ids)
        for note in built.walk.notes:
            sink.on_message(note)
        cache_report = getattr(row_tokenizer, "last_report", None)  # only the cache has one
        for warning in cache_report.warnings if cache_report else ():
            sink.on_message(warning)
        files_skipped = dict(built.walk.skipped + tokenized.files_skipped)
        split = split_rows(tokenized, training.eval.fraction, training.eval.max_rows)
        train_rows = subset(tokenized, split.train)
        dataset = build_dataset(train_rows, training.sequence_len, training.packing, training.instruction_share)
        if len(dataset) == 0:
            raise TrainingError(
                f"{doc.path or '<doc>'}: no usable training rows ({tokenized.files_taken} source files "
                f"taken, skipped: {format_skips(files_skipped)}); add prose or ::instruction:: sections, "
                f"or widen training.sources include patterns"
            )
        check_agreement(group, {"document": doc.dlm_sha256, "tokenizer": tok_sha, "examples": len(dataset),
                                "corpus": corpus_fingerprint(train_rows.keys)})
        ranks = group.gather(rank_entry(info, tokenized.stats, waited, ready))
        lora_run = lora_run_for(training, options)
        lock = _LockStep.prepare(doc, store, ref, tok_sha, train_rows, lora_run,
                                 options, sink, plan) if info.is_main else None
        if lock is None:
            from dlm.lock import apply_determinism

            apply_determinism(lora_run.seed)
        prepared = PreparedRun(doc, store, ref, tokenizer, tokenized, dataset, lora_run, run_id,
                               files_skipped, lock, split, plan, ranks, info.rank)
        report = train_and_publish(prepared, sink) if info.is_main else train_as_peer(prepared)
    if os.environ.get(REPORT_ENV) and info.local_rank == 0:  # each machine's launcher reads its own
        write_report(report, os.environ[REPORT_ENV])
    return report


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


class _LockStep:
    """Determinism-lock work around a run (validation before, write after)."""

    def __init__(self, store: Store, current: DlmLock, decision: LockDecision) -> None:
        self.store, self.current, self.decision = store, current, decision

    @classmethod
    def prepare(cls, doc: Document, store: Store, ref: BaseModelRef, tok_sha: str, tokenized: TokenizedRows,
                lora_run: LoraRun, options: TrainOptions, sink: TrainSink, plan: DistPlan) -> _LockStep:
        from dlm.lock import LockInputs, LockMode, apply_determinism, build_lock, check_lock

        flags = apply_determinism(lora_run.seed)
        training = doc.frontmatter.training
        hyper = lock_hyperparameters(lora_run, training.sequence_len, training.packing, training.instruction_share)
        inputs = LockInputs(
            dlm_id=doc.frontmatter.dlm_id,
            dlm_sha256=doc.dlm_sha256,
            base_model_name=ref.name,
            base_model_revision=ref.revision,
            precision=lora_run.precision,
            seed=lora_run.seed,
            tokenizer_sha256=tok_sha,
            corpus_fingerprint=corpus_fingerprint(tokenized.keys),
            hyperparameters=hyper,
            world_size=plan.world_size,
            per_device_batch_size=plan.per_device_batch_size,
            gradient_accumulation_steps=plan.gradient_accumulation_steps,
            backend=plan.backend,
        )
        current = build_lock(inputs, flags)
        isa_warning = check_cpu_isa(current.cpu_capability)
        decision = check_lock(store.root, current, options.lock_mode or LockMode.DEFAULT)
        for warning in [isa_warning, *decision.warnings] if isa_warning else decision.warnings:
            sink.on_message(warning)
        return cls(store, current, decision)

    def finish(self, run_id: str, adapter_sha: str) -> None:
        from dlm.lock import write_lock

        if self.decision.should_write:
            write_lock(self.store.root, self.current, run_id=run_id, adapter_sha256=adapter_sha)

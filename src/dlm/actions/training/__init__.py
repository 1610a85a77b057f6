"""`dlm train`: from a document to a new adapter version, as one library call (`train`).

The recipe, one module a step:

    types.py    TrainOptions, TrainSink, TrainReport: what a run takes and gives
    plan.py     prepare(): base model, rows, tokenize, held-out split, examples,
                hyperparameters, the one seeding, the lock check -> PreparedRun
    publish.py  train rank 0's run and publish it (or train a peer's shard); one report
    ranks.py    several processes: the launcher's run file, the agreement check
    rank.py     one rank's entry point (`python -m dlm.actions.training.rank RUN_FILE`)

Each step can fail cleanly before the next touches the store; Ctrl-C at any point
before the version is committed leaves the previous adapter current and intact, and
the metrics row of the run is marked `interrupted`. The document is parsed and the
store opened once per process.

On several ranks (started by `--nproc`, torchrun or accelerate) every rank runs the same
recipe with three differences: the tokenize step runs in turns (rank 0 first), so the
others read the rows it cached; the ranks check they hold the same document and corpus;
and only rank 0 takes the writer lock and writes the store (adapter, manifest, metrics,
lock).
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from pathlib import Path
from typing import cast

from ulid import ULID

from dlm.actions.common import DocPath, open_document
from dlm.actions.training.plan import RankSide, prepare, resolve_base
from dlm.actions.training.publish import train_and_publish, train_as_peer
from dlm.actions.training.ranks import check_agreement, launch_train, rank_entry, run_id_for, write_report
from dlm.actions.training.types import DEFAULT_OPTIONS, KeptWarnings, NullSink, TrainOptions, TrainReport, TrainSink
from dlm.doc import Document
from dlm.errors import DlmError, TrainingError
from dlm.lock import LockMode, check_lock_readable
from dlm.store import Store, open_store
from dlm.train.checkpoint import find_resumable
from dlm.train.distributed import (
    REPORT_ENV,
    RankGroup,
    RankInfo,
    StoppedByLauncher,
    launcher_signals,
    make_plan,
    rank_error_message,
    write_rank_error,
)
from dlm.train.launch import LaunchSpec

__all__ = ["LaunchSpec", "LockMode", "NullSink", "TrainOptions", "TrainReport", "TrainSink", "train", "train_document"]


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
    resume: bool = False,
    judge: bool = True,
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
            starts them through torch's launcher (`ranks.launch_train`); `sink` then sees
            nothing until rank 0's report (each rank's output is in its log file).
        launch: the full `LaunchSpec` (several machines, an accelerate config); overrides
            `nproc`. Both are ignored inside a rank (`WORLD_SIZE` set by a launcher).
        resume: continue the interrupted run from its latest checkpoint
            (`dlm.train.checkpoint`), refused when the document, its rows or the
            hyperparameters changed since; one process only.
        judge: False skips the probe report that ends a run (`training.eval.judge`
            off for this run only): a quick run whose adapter nobody will read.

    Returns:
        The `TrainReport` that `dlm train` renders (`--json` prints it).

    Raises:
        DocError, BaseModelError, SourceError, StoreError, LockValidationError, TrainingError:
            each before the store changes.
        RankFailed: a rank of a multi-process run failed (`rank N: cause`).
        KeyboardInterrupt: after marking the run interrupted; the store is unchanged.
    """
    doc, store = open_document(path)
    options = TrainOptions(
        max_steps=max_steps,
        use_cache=use_cache,
        strict_sources=strict_sources,
        lock_mode=lock_mode,
        cache_remote=cache_remote,
        resume=resume,
        judge=judge,
    )
    # a damaged lock is refused now, not after the model is loaded or the ranks started
    check_lock_readable(store.root, lock_mode or LockMode.DEFAULT)
    if launch is None:
        launch = LaunchSpec(nproc or doc.frontmatter.training.nproc or 1)
    if (launch.nproc > 1 or launch.nnodes > 1) and not RankInfo.from_env().distributed:
        if resume:
            raise TrainingError(
                "--resume continues a run in one process; drop --nproc/--nnodes "
                "(training.nproc) or start afresh without --resume"
            )
        return launch_train(Path(path), options, launch)
    return train_document(doc, options, sink, store=store)


def train_document(
    doc: Document, options: TrainOptions = DEFAULT_OPTIONS, sink: TrainSink | None = None, *, store: Store | None = None
) -> TrainReport:
    """Train a new adapter version for `doc` (a `dlm.doc.Document`) in this process
    (one rank of a run when a launcher set `WORLD_SIZE`).

    Args:
        store: the document's store when the caller already opened it.

    Raises:
        BaseModelError, SourceError, StoreError, LockValidationError, TrainingError:
            each before the store changes.
        KeyboardInterrupt: after marking the run interrupted; the store is unchanged.
    """
    info = RankInfo.from_env()
    kept = KeptWarnings(sink if sink is not None and info.is_main else NullSink())
    store = store if store is not None else open_store(doc.frontmatter.dlm_id)
    with launcher_signals(info):
        try:
            return _train_rank(doc, store, options, kept, info)
        except DlmError as exc:
            message = str(exc) if str(exc).startswith("rank ") else rank_error_message(info, str(exc))
            write_rank_error(message)
            if info.distributed and message != str(exc):
                raise TrainingError(message) from exc
            raise
        except (Exception, StoppedByLauncher) as exc:
            write_rank_error(rank_error_message(info, f"{type(exc).__name__}: {exc}"))
            raise


def _train_rank(doc: Document, store: Store, options: TrainOptions, kept: KeptWarnings, info: RankInfo) -> TrainReport:
    sink = cast(TrainSink, kept)
    training = doc.frontmatter.training
    ref = resolve_base(doc)  # before the process group starts (see resolve_base)
    if doc.frontmatter.training.synth.teacher is not None:
        from dlm.rows.teacherstore import fill_teacher_cache

        # one rank asks under the cache's file lock; the others find its replies
        fill_teacher_cache(doc, on_ask=lambda unit: sink.on_note(f"asking the teacher about {unit.where}"))
    plan = make_plan(
        info.world_size, training.batch_size, training.gradient_accumulation_steps, "cuda" if _cuda() else "cpu"
    )
    group = RankGroup(info, plan.device)
    if options.resume and info.distributed:
        raise TrainingError("--resume continues a run in one process; start afresh without --resume")
    run_id = find_resumable(store.staging_dirs())[0] if options.resume else run_id_for(group, str(ULID()))
    with store.train_lock() if info.is_main else nullcontext():
        run = prepare(
            doc,
            store,
            ref,
            options,
            sink,
            RankSide(
                group,
                plan,
                run_id,
                check_agreement,
                lambda stats, waited, ready: rank_entry(info, stats, waited, ready),
            ),
        )
        report = train_and_publish(run, sink) if info.is_main else train_as_peer(run)
    report.warnings = list(dict.fromkeys([*kept.warnings, *report.warnings]))
    if os.environ.get(REPORT_ENV) and info.local_rank == 0:  # each machine's launcher reads its own
        write_report(report, os.environ[REPORT_ENV])
    return report


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())

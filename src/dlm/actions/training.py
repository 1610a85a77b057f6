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
"""

from __future__ import annotations

import shutil
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from ulid import ULID

from dlm.actions.common import DocPath, open_document
from dlm.doc import Document
from dlm.doc.schema import TrainingConfig
from dlm.errors import TrainingError
from dlm.isa import check_cpu_isa
from dlm.lock import DlmLock, LockDecision, LockMode, resolve_lock_mode
from dlm.metrics import MetricsDB, RunRecord, TokenizationRecord
from dlm.models import BaseModelRef, load_model, load_tokenizer, resolve_base_model
from dlm.rows.build import build_rows
from dlm.rows.walk import format_skips
from dlm.store import Store, open_store
from dlm.tokenize.fingerprint import tokenizer_sha256
from dlm.tokenize.keys import corpus_fingerprint
from dlm.tokenize.plain import PlainRowTokenizer
from dlm.tokenize.seam import NullProgress, Progress, RowTokenizer, TokenizedRows
from dlm.train.dataset import PackedDataset, WindowDataset, as_hf_dataset, build_dataset
from dlm.train.evaluate import build_eval_set
from dlm.train.heldout import Split, split_rows, subset
from dlm.train.lora import LoraRun, StepSink, pick_precision, train_lora
from dlm.train.tracking import HeldOutTracker, TokenTally, planned_tokens

__all__ = [
    "NullSink", "TrainOptions", "TrainReport", "TrainSink", "format_skips", "resolve_lock_mode", "train",
    "train_document",
]


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



def _row_counts(tokenized: TokenizedRows) -> dict[str, int]:
    counts: dict[str, int] = {"prose": 0, "instruction": 0, "source": 0}
    for kind in tokenized.kinds:
        counts[kind] += 1
    return counts


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

    Returns:
        The `TrainReport` that `dlm train` renders (`--json` prints it).

    Raises:
        DocError, BaseModelError, SourceError, StoreError, LockValidationError, TrainingError:
            each before the store changes.
        KeyboardInterrupt: after marking the run interrupted; the store is unchanged.
    """
    doc, _ = open_document(path)
    options = TrainOptions(max_steps=max_steps, use_cache=use_cache, strict_sources=strict_sources,
                           lock_mode=lock_mode, cache_remote=cache_remote)
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
    sink = sink if sink is not None else NullSink()
    fm = doc.frontmatter
    training = fm.training
    run_id = str(ULID())
    base_dir = doc.path.parent if doc.path else None
    ref = resolve_base_model(fm.base_model, relative_to=base_dir)
    tokenizer = load_tokenizer(ref)
    tok_sha = tokenizer_sha256(tokenizer)
    store = open_store(fm.dlm_id)
    with store.train_lock():
        built = build_rows(doc, tokenizer, strict=options.strict_sources)
        for note in built.walk.notes:
            sink.on_message(note)
        row_tokenizer = make_row_tokenizer(
            store, tokenizer, tok_sha, training, run_id, options.use_cache, base_dir, options.cache_remote
        )
        tokenized = row_tokenizer.tokenize(built.rows, sink)
        cache_report = getattr(row_tokenizer, "last_report", None)  # only the cache has one
        for warning in cache_report.warnings if cache_report else ():
            sink.on_message(warning)
        files_skipped = dict(built.walk.skipped + tokenized.files_skipped)
        split = split_rows(tokenized, training.eval.fraction, training.eval.max_rows)
        dataset = build_dataset(subset(tokenized, split.train), training.sequence_len, training.packing)
        if len(dataset) == 0:
            raise TrainingError(
                f"{doc.path or '<doc>'}: no usable training rows ({tokenized.files_taken} source files "
                f"taken, skipped: {format_skips(files_skipped)}); add prose or ::instruction:: sections, "
                f"or widen training.sources include patterns"
            )
        lora_run = lora_run_for(training, options)
        lock = _LockStep.prepare(doc, store, ref, tok_sha, subset(tokenized, split.train), lora_run,
                                 options, sink)
        prepared = PreparedRun(doc, store, ref, tokenizer, tokenized, dataset, lora_run, run_id,
                               files_skipped, lock, split)
        return _train_and_publish(prepared, sink)


class _LockStep:
    """Determinism-lock work around a run (validation before, write after)."""

    def __init__(self, store: Store, current: DlmLock, decision: LockDecision) -> None:
        self.store, self.current, self.decision = store, current, decision

    @classmethod
    def prepare(cls, doc: Document, store: Store, ref: BaseModelRef, tok_sha: str, tokenized: TokenizedRows,
                lora_run: LoraRun, options: TrainOptions, sink: TrainSink) -> _LockStep:
        from dlm.lock import LockInputs, LockMode, apply_determinism, build_lock, check_lock

        flags = apply_determinism(lora_run.seed)
        hyper = asdict(lora_run)
        hyper.update(sequence_len=doc.frontmatter.training.sequence_len,
                     packing=doc.frontmatter.training.packing)
        inputs = LockInputs(
            dlm_id=doc.frontmatter.dlm_id,
            dlm_sha256=doc.dlm_sha256,
            base_model_name=ref.name,
            base_model_revision=ref.revision,
            precision=pick_precision(),
            seed=lora_run.seed,
            tokenizer_sha256=tok_sha,
            corpus_fingerprint=corpus_fingerprint(tokenized.keys),
            hyperparameters=hyper,
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
    lock: _LockStep
    split: Split


def _train_and_publish(run: PreparedRun, sink: TrainSink) -> TrainReport:
    from dlm.lock import adapter_sha256, canonicalize_adapter_dir

    stats = run.tokenized.stats
    tokenization = TokenizationRecord(
        stats.total_rows, stats.cache_hits, stats.cache_misses, stats.seconds, stats.cache_bytes_after
    )
    with MetricsDB(run.store.metrics_path) as metrics:
        metrics.start_run(run.run_id, base_model=run.ref.name, max_steps=run.lora_run.max_steps,
                          rows=len(run.tokenized), files_taken=run.tokenized.files_taken,
                          files_skipped=run.files_skipped, heldout_rows=int(run.split.heldout.shape[0]))
        metrics.log_tokenization(run.run_id, tokenization)
        staging = run.store.new_staging_dir(run.run_id)
        recorder = _StepRecorder(metrics, run.run_id, sink)
        heldout, tally = _heldout_tracker(run, metrics, sink), TokenTally()
        sink.on_plan(planned_tokens(run.dataset, run.lora_run.max_steps, run.lora_run.batch_size
                                    * run.lora_run.gradient_accumulation_steps, run.lora_run.num_epochs))
        try:
            model = load_model(run.ref)
            heldout.measure(model, "before", 0)
            result = train_lora(model, run.tokenizer, as_hf_dataset(run.dataset, tally.on_batch),
                                run.lora_run, staging / "trainer", recorder, callbacks=heldout.callbacks())
            heldout.measure(result.model, "after", result.steps)
            shutil.rmtree(staging / "trainer", ignore_errors=True)
            result.model.save_pretrained(staging)
            canonicalize_adapter_dir(staging, base_model_name=run.ref.name)
            sha = adapter_sha256(staging)
            version, adapter_dir = run.store.commit_version(staging)
        except BaseException as exc:
            shutil.rmtree(staging, ignore_errors=True)
            status = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            metrics.finish_run(run.run_id, RunRecord(status, recorder.last_step, None, None, None))
            raise
        metrics.finish_run(run.run_id, RunRecord(
            "completed", result.steps, result.train_loss, result.tokens_per_second, version,
            result.tokens_seen, tally.fraction))
    _record_manifest(run, version, sha)
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
        warnings=list(run.lock.decision.warnings),
        heldout=heldout.summary(), real_token_fraction=tally.fraction,
    )


def _heldout_tracker(run: PreparedRun, metrics: MetricsDB, sink: Any) -> HeldOutTracker:
    """The held-out measurements of `run` (inactive when nothing is held out)."""
    training = run.doc.frontmatter.training
    eval_set = build_eval_set(subset(run.tokenized, run.split.scored), training.sequence_len)
    pad_id = run.tokenizer.pad_token_id if run.tokenizer.pad_token_id is not None else 0
    return HeldOutTracker(eval_set, metrics, run.run_id, sink, training.eval.every_steps, pad_id)


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

"""Everything `dlm train` decides before training: `prepare` turns a document into a
`PreparedRun` without changing the store.

Order (each step can fail cleanly before the next):
1. resolve the base model and its tokenizer, fingerprint the tokenizer;
2. build rows (walk sources) and tokenize them through the seam (cache or plain), in
   turns on several ranks (rank 0 first, `dlm.train.distributed.in_turns`), so the
   others read the rows it cached;
3. set the held-out rows aside (`dlm.train.heldout`) and cut the training examples;
4. the ranks check they hold the same document, tokenizer, corpus and examples;
5. seed (the one place: Python, NumPy and torch, deterministic kernels), then check the
   determinism lock on rank 0 (before any compute is spent on training).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dlm.actions.training.types import TrainOptions, TrainSink
from dlm.cpu_isa import check_cpu_isa
from dlm.doc import Document
from dlm.doc.schema import TrainingConfig
from dlm.errors import TrainingError
from dlm.lock import DeterminismFlags, DlmLock, LockDecision, LockMode
from dlm.models import BaseModelRef, resolve_base_model
from dlm.rows.build import build_rows, check_inputs
from dlm.rows.types import Probe
from dlm.rows.walk import format_skips
from dlm.store import Store
from dlm.tokenize.keys import corpus_fingerprint
from dlm.tokenize.plain import PlainRowEncoder
from dlm.tokenize.seam import RowEncoder, TokenizedRows
from dlm.train.dataset import PackedDataset, WindowDataset, build_dataset
from dlm.train.distributed import DistPlan, RankGroup, RankInfo
from dlm.train.heldout import Split, split_rows, subset
from dlm.train.lora import Hyperparameters, lock_hyperparameters
from dlm.train.precision import resolve_precision
from dlm.train.recipe import DEFAULT_TOKENS_PER_SECOND, MIN_UPDATES, Recipe, choose


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


@dataclass(frozen=True)
class PreparedRun:
    """Everything decided before training starts; the store is not yet changed.

    Attributes:
        tokenizer: the base model's Hugging Face tokenizer (loaded).
        tokenized: every usable row, held-out ones included.
        split: which of `tokenized` train and which are held out.
        dataset: the training examples (`dlm.train.dataset`).
        lock: rank 0's lock step; None on the other ranks (they never write the lock).
        ranks: each rank's tokenization (`dlm.actions.training.ranks.rank_entry`).
        probes: questions scored after training and never trained on.
        steps_reason: why the run has its steps (the recipe's line, or the key or flag).
        resume_from: the checkpoint `--resume` continues from (None: a fresh run).
        judge: end with the probe report (`training.eval.judge`, unless the caller said no).
    """

    doc: Document
    store: Store
    ref: BaseModelRef
    tokenizer: Any
    tokenized: TokenizedRows
    split: Split
    dataset: WindowDataset | PackedDataset
    hyper: Hyperparameters
    run_id: str
    files_skipped: dict[str, int]
    plan: DistPlan
    ranks: list[dict[str, Any]]
    lock: LockStep | None
    rank: int = 0
    probes: tuple[Probe, ...] = ()
    steps_reason: str = ""
    resume_from: Path | None = None
    judge: bool = True

    @property
    def training(self) -> TrainingConfig:
        return self.doc.frontmatter.training


def hyperparameters(training: TrainingConfig, options: TrainOptions) -> Hyperparameters:
    """The LoRA hyperparameters of a run: the document's `training:` with CLI overrides."""
    max_steps = options.max_steps if options.max_steps is not None else training.max_steps
    return Hyperparameters(
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
        gradient_checkpointing=None if training.gradient_checkpointing == "auto" else training.gradient_checkpointing,
    )


def make_row_encoder(
    store: Store,
    tokenizer: Any,
    tokenizer_sha256: str,
    training: TrainingConfig,
    run_id: str,
    use_cache: bool,
    base_dir: Path | None = None,
    cache_remote: str | None = None,
) -> RowEncoder:
    """The seam implementation for this run: the section cache (shared store, remote
    tier when configured) unless disabled."""
    if use_cache and training.cache.enabled:
        from dlm.cache import CachedRowEncoder
        from dlm.cache.remote import resolve_remote
        from dlm.paths import cache_store_dir

        return CachedRowEncoder(
            store.cache_state_dir,
            tokenizer,
            tokenizer_sha256,
            max_bytes=training.cache.max_bytes,
            run_id=run_id,
            trust_stat=training.cache.trust_stat,
            store_dir=cache_store_dir(),
            doc_id=store.dlm_id,
            remote=resolve_remote(training.cache.remote, cache_remote, base_dir),
            sibling_dirs=store.sibling_cache_state_dirs(),
        )
    return PlainRowEncoder(tokenizer, tokenizer_sha256)


def cache_run_id(info: RankInfo, run_id: str) -> str:
    """The name this rank's tokenize session records in the cache (rank 0: the run id)."""
    return run_id if info.is_main else f"{run_id}-r{info.rank}"


def resolve_base(doc: Document) -> BaseModelRef:
    """Check every document-level input (`dlm.rows.build.check_inputs`), then resolve the
    base model, materializing an alias on first use. Call it before the ranks' process
    group starts: under torch.distributed, transformers' `save_pretrained` writes on rank 0
    only, so a rank that won the race to materialize would leave an empty folder.

    Raises:
        SourceError, BaseModelError: naming `path:line:col` of the value at fault.
    """
    check_inputs(doc)
    return resolve_base_model(doc.frontmatter.base_model, relative_to=doc.path.parent if doc.path else None)


def prepare(
    doc: Document,
    store: Store,
    ref: BaseModelRef,
    options: TrainOptions,
    sink: TrainSink,
    group: RankGroup,
    plan: DistPlan,
    run_id: str,
    agree: Callable[[RankGroup, dict[str, Any]], None],
    rank_entry: Callable[[Any, float, float], dict[str, Any]],
) -> PreparedRun:
    """Decide everything of a run (module docstring); rank 0 also checks the lock.

    Args:
        agree: the ranks' agreement check (`ranks.check_agreement`).
        rank_entry: this rank's tokenization summary from (stats, waited, ready) seconds.

    Raises:
        BaseModelError, SourceError, TrainingError, LockValidationError: before the
            store changes.
    """
    from dlm.tokenize.deferred import deferred_tokenizer

    info, training = group.info, doc.frontmatter.training
    base_dir = doc.path.parent if doc.path else None
    deferred, tokenizer_sha256 = deferred_tokenizer(ref)  # the fingerprint from the memo when unchanged
    tokenizer = deferred.load()

    def rows_and_ids() -> tuple[Any, TokenizedRows]:
        built = build_rows(doc, tokenizer, strict=options.strict_sources)
        row_encoder = make_row_encoder(
            store,
            tokenizer,
            tokenizer_sha256,
            training,
            cache_run_id(info, run_id),
            options.use_cache,
            base_dir,
            options.cache_remote,
        )
        return built, row_encoder.tokenize(built.rows, sink)

    (built, tokenized), waited, ready = group.in_turns(rows_and_ids)
    for note in [*built.walk.notes, *tokenized.warnings]:
        sink.on_message(note)
    if built.synth_pairs and training.synth.enabled == "auto":
        sink.on_note(
            f"training.synth (auto): {built.synth_pairs} Q/A pairs state the values of the sources' constants "
            "(`training.synth.enabled: false` leaves them out)"
        )
    files_skipped = dict(built.walk.skipped + tokenized.files_skipped)
    split = split_rows(tokenized, training.eval.fraction, training.eval.max_rows)
    train_rows = subset(tokenized, split.train)
    hyper = hyperparameters(training, options)
    share = training.instruction_share
    recipe, packing = None, training.packing
    steps_reason = (
        "--max-steps"
        if options.max_steps is not None
        else "training.max_steps"
        if training.max_steps is not None
        else "training.num_epochs"
    )
    if hyper.max_steps is None and training.num_epochs is None and len(train_rows):
        recipe = choose_recipe(train_rows, training, plan, _tokens_per_second(store), packing)
        share = share if share is not None else recipe.instruction_share
    dataset = build_dataset(train_rows, training.sequence_len, packing, share)
    if recipe is not None and len(dataset):
        per_step = training.batch_size * training.gradient_accumulation_steps * plan.world_size
        steps = recipe.max_steps or max(1, -(-len(dataset) // per_step))
        if packing and recipe.max_steps is None and steps < MIN_UPDATES:
            # a small document packs into a handful of blocks: too few optimizer steps to learn it
            packing = False
            recipe = choose_recipe(train_rows, training, plan, _tokens_per_second(store), packing)
            share = training.instruction_share if training.instruction_share is not None else recipe.instruction_share
            dataset = build_dataset(train_rows, training.sequence_len, packing, share)
            steps = recipe.max_steps or max(1, -(-len(dataset) // per_step))
        hyper = replace(hyper, max_steps=steps)
        layout = "packed blocks" if packing else "one example per row"
        steps_reason = f"recipe: {steps} steps ({recipe.reason}; {len(dataset)} examples, {layout})"
        sink.on_note(steps_reason)
        if recipe.warning:
            sink.on_message(recipe.warning)
    if len(dataset) == 0:
        raise TrainingError(
            f"{doc.path or '<doc>'}: no usable training rows ({tokenized.files_taken} source files "
            f"taken, skipped: {format_skips(files_skipped)}); add prose or ::instruction:: sections, "
            f"or widen training.sources include patterns"
        )
    corpus = corpus_fingerprint(train_rows.keys)
    agree(
        group, {"document": doc.dlm_sha256, "tokenizer": tokenizer_sha256, "examples": len(dataset), "corpus": corpus}
    )
    ranks = group.gather(rank_entry(tokenized.stats, waited, ready))
    flags = _seed(hyper.seed)
    lock = (
        _check_lock(doc, store, ref, tokenizer_sha256, corpus, hyper, share, packing, flags, options, sink, plan)
        if info.is_main
        else None
    )
    resume_from = _resume_point(store, run_id, lock) if options.resume else None
    return PreparedRun(
        doc=doc,
        store=store,
        ref=ref,
        tokenizer=tokenizer,
        tokenized=tokenized,
        split=split,
        dataset=dataset,
        hyper=hyper,
        run_id=run_id,
        files_skipped=files_skipped,
        plan=plan,
        ranks=ranks,
        lock=lock,
        rank=info.rank,
        probes=built.probes,
        steps_reason=steps_reason,
        resume_from=resume_from,
        judge=options.judge and doc.frontmatter.training.eval.judge,
    )


def _resume_point(store: Store, run_id: str, lock: LockStep | None) -> Path:
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


def _seed(seed: int) -> DeterminismFlags:
    """The run's one seeding: Python, NumPy, torch and deterministic kernels, on every
    rank, after the rows are built and before any model is loaded (loading draws from
    torch's generator)."""
    from dlm.lock import apply_determinism

    return apply_determinism(seed)


def choose_recipe(
    train_rows: TokenizedRows, training: TrainingConfig, plan: DistPlan, tokens_per_second: float, packing: bool
) -> Recipe:
    """The default recipe for these rows (`dlm.train.recipe`), counted in the unit the
    example layout balances: windows, or tokens when packing."""
    counting = WindowDataset(train_rows, training.sequence_len)
    kinds = np.fromiter((k == "instruction" for k in train_rows.kinds), dtype=bool, count=len(train_rows))
    is_instruction = kinds[counting.row]
    sizes = (counting.stop - counting.start) if packing else np.ones(len(counting), dtype=np.int64)
    per_step = training.batch_size * training.gradient_accumulation_steps * plan.world_size
    units_per_step = per_step * (training.sequence_len if packing else 1)
    budget = training.parsed_budget
    budget_units = None
    if budget is not None:
        tokens = budget.as_tokens(tokens_per_second)
        per_unit = 1.0 if packing else counting.total_tokens / max(len(counting), 1)
        budget_units = tokens / per_unit
    return choose(float(sizes[is_instruction].sum()), float(sizes[~is_instruction].sum()), units_per_step, budget_units)


def _tokens_per_second(store: Store) -> float:
    """This store's last completed run's training rate (tokens/s), else the recipe's default
    (only a time budget uses it)."""
    from dlm.metrics import MetricsDB

    if store.metrics_path.is_file():
        with MetricsDB(store.metrics_path) as metrics:
            for run in reversed(metrics.runs()):
                if run["status"] == "completed" and run.get("tokens_per_second"):
                    return float(run["tokens_per_second"])
    return DEFAULT_TOKENS_PER_SECOND


def _check_lock(
    doc: Document,
    store: Store,
    ref: BaseModelRef,
    tokenizer_sha256: str,
    corpus: str,
    hyper: Hyperparameters,
    share: float | None,
    packing: bool,
    flags: DeterminismFlags,
    options: TrainOptions,
    sink: TrainSink,
    plan: DistPlan,
) -> LockStep:
    from dlm.lock import LockInputs, build_lock, check_lock

    inputs = LockInputs(
        dlm_id=doc.frontmatter.dlm_id,
        dlm_sha256=doc.dlm_sha256,
        base_model_name=ref.name,
        base_model_revision=ref.revision,
        precision=hyper.precision,
        seed=hyper.seed,
        tokenizer_sha256=tokenizer_sha256,
        corpus_fingerprint=corpus,
        hyperparameters=lock_hyperparameters(hyper, doc.frontmatter.training.sequence_len, packing, share),
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
    return LockStep(store, current, decision)

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dlm.actions.training.lockstep import LockStep, check_run_lock, lock_inputs, resume_point
from dlm.actions.training.types import TrainOptions, TrainSink
from dlm.doc import Document
from dlm.doc.schema import TrainingConfig
from dlm.errors import TrainingError
from dlm.lock import DeterminismFlags
from dlm.models import BaseModelRef, resolve_base_model
from dlm.rows.build import build_rows, check_inputs
from dlm.rows.types import Probe
from dlm.rows.walk import format_skips
from dlm.store import Store
from dlm.tokenize.keys import corpus_fingerprint
from dlm.tokenize.plain import PlainRowEncoder
from dlm.tokenize.seam import RowEncoder, TokenizedRows
from dlm.train.dataset import PackedDataset, WindowDataset, build_dataset, row_kinds
from dlm.train.distributed import DistPlan, RankGroup, RankInfo
from dlm.train.heldout import Split, split_rows, subset
from dlm.train.lora import Hyperparameters, lock_hyperparameters
from dlm.train.precision import resolve_precision
from dlm.train.recipe import DEFAULT_TOKENS_PER_SECOND, MIN_UPDATES, SYNTH_REPEATS, Recipe, choose, synth_warning


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
        synth_by_source: `training.synth` pairs and probes per source kind
            (`dlm.rows.build.BuiltRows.synth_by_source`).
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
    synth_by_source: dict[str, dict[str, int]] = field(default_factory=dict)
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
        replay_loss=training.replay_loss,
        replay_weight=training.replay_weight,
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


@dataclass(frozen=True)
class RankSide:
    """Who prepares the run: this process among the ranks, and how the ranks meet.

    Attributes:
        group: the ranks' process group (`dlm.train.distributed.RankGroup`).
        plan: world size, micro-batch, accumulation, backend.
        run_id: the run's id (the same on every rank).
        agree: the ranks' agreement check (`ranks.check_agreement`).
        rank_entry: this rank's tokenization summary from (stats, waited, ready) seconds.
    """

    group: RankGroup
    plan: DistPlan
    run_id: str
    agree: Callable[[RankGroup, dict[str, Any]], None]
    rank_entry: Callable[[Any, float, float], dict[str, Any]]


@dataclass(frozen=True)
class _Examples:
    """The training examples and how their number of steps was chosen."""

    dataset: WindowDataset | PackedDataset
    hyper: Hyperparameters
    share: float | None
    packing: bool
    steps_reason: str


def prepare(
    doc: Document, store: Store, ref: BaseModelRef, options: TrainOptions, sink: TrainSink, side: RankSide
) -> PreparedRun:
    """Decide everything of a run (module docstring); rank 0 also checks the lock.

    Raises:
        BaseModelError, SourceError, TrainingError, LockValidationError: before the
            store changes.
    """
    from dlm.tokenize.deferred import deferred_tokenizer

    info, training = side.group.info, doc.frontmatter.training
    deferred, tokenizer_sha256 = deferred_tokenizer(ref)  # the fingerprint from the memo when unchanged
    tokenizer = deferred.load()

    def rows_and_ids() -> tuple[Any, TokenizedRows]:
        replay = replay_rows(ref, tokenizer, sink) if training.replay > 0 else ()
        built = build_rows(doc, tokenizer, strict=options.strict_sources, replay=replay)
        row_encoder = make_row_encoder(
            store,
            tokenizer,
            tokenizer_sha256,
            training,
            cache_run_id(info, side.run_id),
            options.use_cache,
            doc.path.parent if doc.path else None,
            options.cache_remote,
        )
        return built, row_encoder.tokenize(built.rows, sink)

    (built, tokenized), waited, ready = side.group.in_turns(rows_and_ids)
    _say_notes(doc, tokenizer, built, tokenized, sink, options)
    files_skipped = dict(built.walk.skipped + tokenized.files_skipped)
    split = split_rows(tokenized, training.eval.fraction, training.eval.max_rows)
    train_rows = subset(tokenized, split.train)
    chosen = _examples(train_rows, training, options, store, side.plan, sink)
    if len(chosen.dataset) == 0:
        raise TrainingError(
            f"{doc.path or '<doc>'}: no usable training rows ({tokenized.files_taken} source files "
            f"taken, skipped: {format_skips(files_skipped)}); add prose or ::instruction:: sections, "
            f"or widen training.sources include patterns"
        )
    corpus = corpus_fingerprint(train_rows.keys)
    facts = {"document": doc.dlm_sha256, "tokenizer": tokenizer_sha256, "examples": len(chosen.dataset)}
    side.agree(side.group, {**facts, "corpus": corpus})
    ranks = side.group.gather(side.rank_entry(tokenized.stats, waited, ready))
    flags = _seed(chosen.hyper.seed)
    lock = None
    if info.is_main:
        synth = SYNTH_REPEATS if "synth" in train_rows.kinds else None
        hashed = lock_hyperparameters(
            chosen.hyper, training.sequence_len, chosen.packing, chosen.share, replay_share(training), synth
        )
        inputs = lock_inputs(doc, ref, tokenizer_sha256, corpus, chosen.hyper, hashed, side.plan)
        lock = check_run_lock(store, inputs, flags, options.lock_mode, sink)
    return PreparedRun(
        doc=doc,
        store=store,
        ref=ref,
        tokenizer=tokenizer,
        tokenized=tokenized,
        split=split,
        dataset=chosen.dataset,
        hyper=chosen.hyper,
        run_id=side.run_id,
        files_skipped=files_skipped,
        plan=side.plan,
        ranks=ranks,
        lock=lock,
        rank=info.rank,
        probes=built.probes,
        synth_by_source=built.synth_by_source,
        steps_reason=chosen.steps_reason,
        resume_from=resume_point(store, side.run_id, lock) if options.resume else None,
        judge=options.judge and training.eval.judge,
    )


def _say_notes(
    doc: Document, tokenizer: Any, built: Any, tokenized: TokenizedRows, sink: TrainSink, options: TrainOptions
) -> None:
    """The rows' notes and warnings, what synth added, and the judging estimate when the
    probe report will be long."""
    from dlm.actions.evaluating import judging_notes

    for note in [*built.walk.notes, *tokenized.warnings]:
        sink.on_message(note)
    training = doc.frontmatter.training
    if built.synth_pairs and training.synth.enabled == "auto":
        sink.on_note(
            f"training.synth (auto): {built.synth_pairs} Q/A pairs state the facts of the prose, the Markdown, "
            "config values and constants, in several phrasings (`training.synth.enabled: false` leaves them out)"
        )
    if options.judge and training.eval.judge:
        for note in judging_notes(doc, tokenizer, built.probes):
            sink.on_message(note)


def _examples(
    train_rows: TokenizedRows,
    training: TrainingConfig,
    options: TrainOptions,
    store: Store,
    plan: DistPlan,
    sink: TrainSink,
) -> _Examples:
    """The training examples and the run's steps: from `--max-steps`, `training.max_steps`
    or `training.num_epochs` when set, else from the recipe (`dlm.train.recipe`), which
    trains a small document one sequence per example (`dlm.train.shared_prefix`: a
    micro-batch's examples in one row) when packed blocks would give it too few optimizer
    steps."""
    hyper = hyperparameters(training, options)

    def examples(packing: bool, share: float | None) -> WindowDataset | PackedDataset:
        return build_dataset(train_rows, training.sequence_len, packing, share, replay_share(training), SYNTH_REPEATS)

    share, packing = training.instruction_share, training.packing
    fixed = (
        "--max-steps"
        if options.max_steps is not None
        else "training.max_steps"
        if training.max_steps is not None
        else "training.num_epochs"
        if training.num_epochs is not None or not len(train_rows)
        else None
    )
    if fixed is not None:
        drawn = f"instruction pairs {share:.0%} of what is drawn" if share is not None else "each example once"
        reason = f"{fixed}, not the recipe: {_layout(packing)}, {drawn}"
        if len(train_rows):  # without rows the run stops on that, not on its layout
            sink.on_note(reason)
        return _Examples(examples(packing, share), hyper, share, packing, reason)
    per_step = training.batch_size * training.gradient_accumulation_steps * plan.world_size
    for packing in [True, False] if training.packing else [False]:
        recipe = choose_recipe(train_rows, training, plan, _tokens_per_second(store), packing)
        share = training.instruction_share if training.instruction_share is not None else recipe.instruction_share
        dataset = examples(packing, share)
        steps = recipe.max_steps or max(1, -(-len(dataset) // per_step))
        # a small document packs into a handful of blocks: too few optimizer steps to learn it
        if not packing or recipe.max_steps is not None or steps >= MIN_UPDATES:
            break
    reason = f"recipe: {steps} steps ({recipe.reason}; {len(dataset)} examples, {_layout(packing)})"
    sink.on_note(reason)
    if recipe.warning:
        sink.on_message(recipe.warning)
    if recipe.max_steps is not None and "synth" in train_rows.kinds:
        cut = synth_warning(steps, per_step, len(dataset))
        if cut:
            sink.on_message(cut)
    return _Examples(dataset, replace(hyper, max_steps=steps), share, packing, reason)


def _layout(packing: bool) -> str:
    """How a run's examples form its micro-batches, in the words of its steps' reason."""
    return (
        "packed blocks of up to sequence_len tokens"
        if packing
        else "one sequence per example, a micro-batch in one row"
    )


def _seed(seed: int) -> DeterminismFlags:
    """The run's one seeding: Python, NumPy, torch and deterministic kernels, on every
    rank, after the rows are built and before any model is loaded (loading draws from
    torch's generator)."""
    from dlm.lock import apply_determinism

    return apply_determinism(seed)


def replay_share(training: TrainingConfig) -> float | None:
    """The share of examples drawn that replay general questions (None: no replay rows)."""
    return training.replay or None


def replay_rows(ref: BaseModelRef, tokenizer: Any, sink: TrainSink) -> list[tuple[str, str, str]]:
    """`(origin, question, answer)` of the replay prompts the base model answered
    (`dlm.rows.replay`, `dlm.actions.training.replay`); rank 0 generates them on a first run, the
    other ranks read what it kept (they run after it, `in_turns`).

    Raises:
        TrainingError: the shipped prompt file is missing or damaged (a broken install).
    """
    from dlm.actions.training.replay import replay_answers
    from dlm.rows.replay import load_replay_set, replay_pairs

    try:
        prompts = load_replay_set()
    except ValueError as exc:  # names the file and says to reinstall
        raise TrainingError(f"{exc}, or set training.replay: 0") from None
    return replay_pairs(prompts.prompts, replay_answers(ref, tokenizer, prompts, sink.on_note))


def choose_recipe(
    train_rows: TokenizedRows, training: TrainingConfig, plan: DistPlan, tokens_per_second: float, packing: bool
) -> Recipe:
    """The default recipe for these rows (`dlm.train.recipe`), counted in the unit the
    example layout balances: windows, or tokens when packing."""
    counting = WindowDataset(train_rows, training.sequence_len)
    kinds = row_kinds(train_rows)[counting.row]
    is_instruction = kinds == "instruction"
    sizes = (counting.stop - counting.start) if packing else np.ones(len(counting), dtype=np.int64)
    sizes = np.where(np.isin(kinds, ["synth", "replay"]), 0, sizes)  # drawn on top: their own repeats and share
    per_step = training.batch_size * training.gradient_accumulation_steps * plan.world_size
    units_per_step = per_step * (training.sequence_len if packing else 1)
    budget = training.parsed_budget
    budget_units = None
    if budget is not None:
        tokens = budget.as_tokens(tokens_per_second)
        per_unit = 1.0 if packing else counting.total_tokens / max(len(counting), 1)
        budget_units = tokens / per_unit
    instruction, other = float(sizes[is_instruction].sum()), float(sizes[~is_instruction].sum())
    return choose(instruction, other, units_per_step, budget_units, synth=bool((kinds == "synth").any()))


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

"""One evaluation of an adapter: every item on the base, the adapter and the null
adapter, the general-ability guard and the general probes on the base and the adapter
(`dlm.judge.forgetting`); the `EvalReport` that `dlm eval` prints and `dlm train` ends
with.

Numbers in the report are rounded (log-probabilities to 4 decimals, percentages to 2)
and it holds no timing, so the same adapter gives the same report bytes on the same
machine class (`dlm eval --json` twice prints the same bytes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dlm.judge.forgetting import (
    GeneralProbeItems,
    forgotten_warning,
    probe_results,
    rejudged_probes,
    replies_nll,
    sample_flips,
)
from dlm.judge.guard import GuardScore, change_pct, guard_examples, guard_score
from dlm.judge.memo import BaseSide, BaseSideMemo, ReportMemo, report_key
from dlm.judge.null import add_null_adapter
from dlm.judge.score import (
    BASE,
    GENERATE_BATCH,
    GENERATE_CACHE_BYTES,
    EvalItem,
    greedy_rows,
    item_score,
    reference_examples,
    reference_logprobs,
)

MODELS = ("base", "adapter", "null")
KIND_ORDER = ("instruction", "probe", "synth")


@dataclass(frozen=True)
class ItemResult:
    """One item on the three models: `replies[model]`, `passed[model]`, `logprob[model]`."""

    kind: str
    question: str
    answer: str
    keys: tuple[str, ...]
    origin: str
    replies: dict[str, str]
    passed: dict[str, bool]
    logprob: dict[str, float]


@dataclass(frozen=True)
class KindSummary:
    """Items of one kind: how many, how many passed per model, mean log-probability per
    token of the reference answers per model (nats)."""

    total: int
    passed: dict[str, int]
    logprob: dict[str, float]


@dataclass
class EvalReport:
    """The evaluation of one adapter version (module docstring).

    Attributes:
        kinds: kind -> `KindSummary` ("instruction": recall of trained pairs; "probe":
            the document's probes; "synth": pairs drawn from the code, never trained).
        general: the guard: base and adapter NLL per token and `change_pct`.
        warnings: thresholds crossed (`training.eval.general_max_increase`) and general
            probes forgotten.
        general_probes: the general probes on the base and the adapter, None when none
            were asked (`dlm.judge.forgetting` has the shape).
    """

    adapter_version: str
    kinds: dict[str, KindSummary]
    items: list[ItemResult]
    general: dict[str, Any] | None
    heldout: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    general_probes: dict[str, Any] | None = None

    def passed(self, model: str = "adapter", kinds: Sequence[str] = ("probe", "synth")) -> int:
        """Items of `kinds` that `model` answered right."""
        return sum(self.kinds[k].passed[model] for k in kinds if k in self.kinds)

    def total(self, kinds: Sequence[str] = ("probe", "synth")) -> int:
        return sum(self.kinds[k].total for k in kinds if k in self.kinds)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalReport:
        """The report `as_dict()` gave (read back from JSON: tuples come back as lists).

        Raises:
            KeyError, TypeError: `data` is not such a dict.
        """
        return cls(
            adapter_version=data["adapter_version"],
            kinds={k: KindSummary(**v) for k, v in data["kinds"].items()},
            items=[ItemResult(**{**item, "keys": tuple(item["keys"])}) for item in data["items"]],
            general=data["general"],
            heldout=data.get("heldout"),
            warnings=list(data.get("warnings") or []),
            general_probes=data.get("general_probes"),
        )


def judge_adapter(
    peft_model: Any,
    tokenizer: Any,
    items: Sequence[EvalItem],
    general_texts: Sequence[str],
    *,
    adapter_version: str,
    seed: int,
    max_new_tokens: int,
    general_max_increase: float | None = None,
    memo: BaseSideMemo | None = None,
    reports: ReportMemo | None = None,
    adapter_sha256: str | None = None,
    precision: str = "float32",
    reuse: bool = True,
    general_probes: GeneralProbeItems | None = None,
    general_samples: int = 0,
) -> EvalReport:
    """Score `items` and the guard on the base, the trained adapter and its null adapter,
    and `general_probes` on the base and the trained adapter, each flip of them drawn
    `general_samples` more times of both (`dlm.judge.forgetting`).

    Args:
        peft_model: a peft `PeftModel` whose active adapter is the trained one. The null
            adapter is added beside it (`dlm.judge.null`) and the trained one is active
            again on return.
        general_texts: the guard's passages (`dlm.judge.general.load_general_set`).
        seed: seeds the null adapter (the run's `training.seed`).
        general_max_increase: percent; a larger guard change adds a warning.
        memo: where the base model's side is remembered (`dlm.judge.memo`): read when its
            key matches, else computed and written. The report is the same bytes either way.
        reports: where whole reports are remembered, used with `memo` and
            `adapter_sha256` (`dlm.judge.memo.adapter_files_sha256` of the adapter as
            saved): a report stored under this evaluation's key is returned as it is.
        precision: the dtype name the general set is scored in (`dlm.judge.guard`).
        reuse: read what `memo` and `reports` hold; False scores every side afresh and
            still writes both (`dlm eval --recompute`).
        general_probes: the general probes rendered for this document
            (`dlm.judge.forgetting.general_probe_items`); None asks none.

    Raises:
        OSError: `memo`'s or `reports`' file cannot be written.
    """
    examples = reference_examples(tokenizer, items)
    guard = guard_examples(tokenizer, general_texts)
    probe_items = list(general_probes.items) if general_probes is not None else []
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    generation_pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    base_key = key = None
    if memo is not None:
        base_key = memo.key(
            examples,
            guard,
            pad_id=pad_id,
            generation_pad_id=generation_pad,
            max_new_tokens=max_new_tokens,
            generate_batch=GENERATE_BATCH,
            generate_cache_bytes=GENERATE_CACHE_BYTES,
            general_precision=precision,
            probes=general_probes.key(tokenizer) if general_probes is not None else None,
        )
        if reports is not None and adapter_sha256 is not None:
            key = report_key(
                base_key,
                adapter_sha256,
                seed=seed,
                general_max_increase=general_max_increase,
                general_samples=general_samples,
            )
            stored = reports.read(key) if reuse else None
            if stored is not None:
                try:
                    remembered = EvalReport.from_dict({**stored, "adapter_version": adapter_version})
                    return rejudged(remembered, items, general_probes)
                except (KeyError, TypeError, AttributeError, ValueError):
                    pass  # a damaged file is a miss: scored afresh and rewritten below
    trained = peft_model.active_adapter
    null = add_null_adapter(peft_model, seed, trained)
    logprobs: dict[str, list[float]] = {}
    general: dict[str, GuardScore] = {}
    try:
        # one pass answers every item on the three models and every general probe on the
        # adapter (`greedy_rows`); the base answers the general probes apart (`_base_side`)
        rows = [(item.prompt_text, name) for item in items for name in (BASE, trained, null)]
        flat = greedy_rows(
            peft_model, tokenizer, rows + [(p.prompt_text, trained) for p in probe_items], max_new_tokens
        )
        replies = {m: flat[k : len(rows) : len(MODELS)] for k, m in enumerate(MODELS)}
        base = _base_side(
            peft_model,
            tokenizer,
            examples,
            guard,
            probe_items,
            max_new_tokens,
            pad_id,
            precision,
            memo,
            base_key,
            reuse,
        )
        logprobs["base"], general["base"] = base.logprobs, base.general or GuardScore(0.0, 0, 0)
        for model, name in (("adapter", trained), ("null", null)):
            peft_model.set_adapter(name)
            logprobs[model] = reference_logprobs(peft_model, examples, pad_id)
            if model == "adapter":
                general["adapter"] = guard_score(peft_model, guard, pad_id, precision)
    finally:
        peft_model.set_adapter(trained)
        peft_model.delete_adapter(null)
    results = _results(items, replies, logprobs)
    report = EvalReport(adapter_version, summarize(results), results, _general(general) if guard else None)
    if general_probes is not None:
        greedy = flat[len(rows) :]
        nll = replies_nll(peft_model, tokenizer, general_probes, base.probes or [], trained, pad_id)
        report.general_probes = probe_results(general_probes, base.probes or [], greedy, reply_nll=nll)
        flipped = report.general_probes["flipped"]
        if general_samples and flipped:
            drawn = sample_flips(
                peft_model, tokenizer, general_probes, flipped, trained, general_samples, max_new_tokens, seed
            )
            report.general_probes = probe_results(general_probes, base.probes or [], greedy, drawn, nll)
    report.warnings = _warnings(report, general_max_increase)
    if reports is not None and key is not None:
        reports.write(key, report.as_dict())
    return report


def _results(
    items: Sequence[EvalItem], replies: dict[str, list[str]], logprobs: dict[str, list[float]]
) -> list[ItemResult]:
    """Each item's replies, verdicts and log-probabilities (rounded) on the three models."""
    scores = {
        m: [item_score(item, r, lp) for item, r, lp in zip(items, replies[m], logprobs[m], strict=True)] for m in MODELS
    }
    return [
        ItemResult(
            item.kind,
            item.question,
            item.answer,
            item.keys,
            item.origin,
            {m: scores[m][i].reply for m in MODELS},
            {m: scores[m][i].passed for m in MODELS},
            {m: round(scores[m][i].logprob, 4) for m in MODELS},
        )
        for i, item in enumerate(items)
    ]


def _warnings(report: EvalReport, general_max_increase: float | None) -> list[str]:
    """The thresholds `report` crosses: the guard's change, general probes forgotten."""
    warnings = []
    if report.general and general_max_increase is not None and report.general["change_pct"] > general_max_increase:
        warnings.append(
            f"general ability: the adapter's NLL on the general set rose {report.general['change_pct']:.1f}% "
            f"over the base (threshold {general_max_increase:g}%); lower learning_rate or max_steps, or raise "
            "training.eval.general_max_increase"
        )
    forgotten = forgotten_warning(report.general_probes) if report.general_probes else None
    if forgotten:
        warnings.append(forgotten)
    return warnings


def rejudged(
    report: EvalReport, items: Sequence[EvalItem], general_probes: GeneralProbeItems | None = None
) -> EvalReport:
    """`report`, remembered under the items' token ids, judged again for `items` as they
    are now: their kind, keys, origin and the current pass rule (`dlm.judge.match`)
    applied to the remembered replies, the general probes' replies too. The key
    (`dlm.judge.memo.report_key`) names what the replies and log-probabilities depend on;
    a verdict also depends on the keys and the rule, which can change without changing a
    token the models see. The warnings follow the verdicts; the guard's warning is kept.

    Raises:
        ValueError: `report` holds another number of items or other general probes (a
            damaged memo).
    """
    if len(items) != len(report.items):
        raise ValueError(f"the remembered report has {len(report.items)} items, not {len(items)}")
    replies = {m: [old.replies[m] for old in report.items] for m in MODELS}
    logprobs = {m: [old.logprob[m] for old in report.items] for m in MODELS}
    results = _results(items, replies, logprobs)  # logprobs already rounded: rounding again keeps them
    probes = None
    if general_probes is not None:
        if report.general_probes is None:
            raise ValueError("the remembered report has no general probes")
        probes = rejudged_probes(report.general_probes, general_probes)
    warnings = [w for w in report.warnings if not w.startswith("general probes:")]
    forgotten = forgotten_warning(probes) if probes else None
    return EvalReport(
        report.adapter_version,
        summarize(results),
        results,
        report.general,
        report.heldout,
        warnings + ([forgotten] if forgotten else []),
        probes,
    )


def _base_side(
    peft_model: Any,
    tokenizer: Any,
    examples: list[Any],
    guard: list[Any],
    probes: Sequence[EvalItem],
    max_new_tokens: int,
    pad_id: int,
    precision: str,
    memo: BaseSideMemo | None,
    key: str | None,
    reuse: bool,
) -> BaseSide:
    """The items' reference log-probabilities, the guard and the replies to the general
    `probes` on the base model (the adapters disabled). With `reuse`, the
    log-probabilities and the replies come from `memo` when it holds them under `key`
    (`BaseSideMemo.key` of this evaluation), and the guard from `memo`'s shared file when
    it has one (checked, `BaseSideMemo.read_general`), else from the document's memo;
    whatever is missing is scored and written back. A shared score is never copied into
    the document's memo (`dlm.judge.memo`). `general` is `GuardScore(0.0, 0, 0)` without
    a guard set; `probes` is None without general probes."""
    side = memo.read(key, len(examples), len(probes)) if memo is not None and key is not None and reuse else None
    shared = memo is not None and memo.general_path is not None
    general_key = memo.general_key(guard, pad_id=pad_id, precision=precision) if memo is not None and guard else None
    logprobs = side.logprobs if side is not None else None
    replies = side.probes if side is not None else None
    if probes and replies is None:
        # batches of their own: the rows whose replies the report shows for the adapter
        # keep their batches whether or not these come from the memo
        replies = greedy_rows(peft_model, tokenizer, [(p.prompt_text, BASE) for p in probes], max_new_tokens)
    general: GuardScore | None = GuardScore(0.0, 0, 0) if not guard else None
    if guard and reuse and memo is not None:
        general = memo.read_general(general_key) if shared and general_key else side.general if side else None
    if logprobs is not None and general is not None:
        return BaseSide(logprobs, general, replies)
    with peft_model.disable_adapter():
        if logprobs is None:
            logprobs = reference_logprobs(peft_model, examples, pad_id)
        if general is None:
            general = guard_score(peft_model, guard, pad_id, precision)
            if memo is not None and general_key is not None:
                memo.write_general(general_key, general)
    if memo is not None and key is not None:
        memo.write(key, BaseSide(logprobs, general if guard and not shared else None, replies))
    return BaseSide(logprobs, general, replies)


def summarize(results: Sequence[ItemResult]) -> dict[str, KindSummary]:
    """Per kind, in `KIND_ORDER`: counts passed and mean log-probabilities per model."""
    kinds: dict[str, KindSummary] = {}
    for kind in KIND_ORDER:
        of_kind = [r for r in results if r.kind == kind]
        if of_kind:
            kinds[kind] = KindSummary(
                len(of_kind),
                {m: sum(r.passed[m] for r in of_kind) for m in MODELS},
                {m: round(sum(r.logprob[m] for r in of_kind) / len(of_kind), 4) for m in MODELS},
            )
    return kinds


def _general(general: dict[str, GuardScore]) -> dict[str, Any]:
    base, adapter = general["base"], general["adapter"]
    return {
        "base_nll": round(base.nll, 4),
        "adapter_nll": round(adapter.nll, 4),
        "change_pct": change_pct(base, adapter),
        "passages": base.passages,
        "tokens": base.tokens,
    }

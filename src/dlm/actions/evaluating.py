"""`dlm eval`: does the adapter know its document, and what did it break?

Scores every `::instruction::` pair (recall), every `::probe::` pair and every pair
`training.synth` held out of training, on the base model, the adapter and a null
adapter (`dlm.judge`), plus the general-ability guard and the general probes (questions
the base answers right, asked again of the adapter: `dlm.judge.forgetting`); records the report in the
store's `metrics.sqlite` and returns it. `dlm train` ends with the same report
(`judge_trained`), scored on the model it just trained. Both remember the base model's
side in the store (`Store.judge_base_path`, `dlm.judge.memo`), so the next evaluation
with the same items, base model and machine scores only the adapter and the null adapter,
and the whole report by adapter (`Store.judge_reports_dir`), so `dlm eval` of an adapter
already scored reads its report instead of scoring it again. `dlm eval` scores under
the determinism switches training sets (`scoring_switches`): the same numbers, the same
memo keys.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm.actions.common import DocPath, doc_dir, open_document
from dlm.doc import Document, InstructionSection
from dlm.errors import StoreError
from dlm.rows.types import Probe

if TYPE_CHECKING:
    from dlm.judge.memo import BaseSideMemo
    from dlm.judge.report import EvalReport
    from dlm.models import BaseModelRef
    from dlm.store import Store


def eval_items(doc: Document, tokenizer: Any, probes: Sequence[Probe]) -> list[Any]:
    """The items of `doc` (`dlm.judge.score.EvalItem`): its instruction pairs, then its
    probes (document order; probes drawn from the code are `synth`)."""
    from dlm.judge.score import make_item

    name = str(doc.path) if doc.path else "<doc>"
    system = doc.frontmatter.system_prompt
    items = [
        make_item(tokenizer, system, "instruction", p.question, p.answer, p.keys, f"{name}:{p.line}")
        for s in doc.sections
        if isinstance(s, InstructionSection)
        for p in s.pairs
    ]
    items += [
        make_item(
            tokenizer,
            system,
            "synth" if p.origin.endswith("(synth)") else "probe",
            p.question,
            p.answer,
            p.keys,
            p.origin,
        )
        for p in probes
    ]
    return items


def judging_notes(doc: Document, tokenizer: Any, probes: Sequence[Probe]) -> list[str]:
    """The warning `dlm.judge.estimate` gives for the questions the probe report judges
    (the document's instruction pairs and every probe), or none; nothing is tokenized
    below `dlm.judge.estimate.MANY_QUESTIONS` questions."""
    from dlm.judge.estimate import judging_warning

    texts = [(p.question, p.answer) for s in doc.sections if isinstance(s, InstructionSection) for p in s.pairs]
    texts += [(p.question, p.answer) for p in probes]
    warning = judging_warning(
        texts,
        lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"]),
        doc.frontmatter.training.eval.max_new_tokens,
    )
    return [warning] if warning else []


def general_texts() -> list[str]:
    """The general-ability guard's passages (`dlm.judge.general`)."""
    from dlm.judge.general import load_general_set

    return [text for _, text in load_general_set()]


def general_probes(doc: Document, tokenizer: Any) -> Any:
    """The general probes shipped with dlm rendered for `doc` (its system prompt), as
    `dlm.judge.forgetting.GeneralProbeItems`.

    Raises:
        InstallError: the probe file is missing or damaged (a broken install).
    """
    from dlm.judge.forgetting import general_probe_items
    from dlm.judge.general import load_general_probes

    return general_probe_items(tokenizer, doc.frontmatter.system_prompt, load_general_probes())


def scored_adapter(ref: BaseModelRef, adapter_dir: Path) -> Any:
    """The peft adapter saved in `adapter_dir` on a fresh float32 base model, on the
    device training uses (`dlm.train.precision.training_device`): the model `dlm eval`
    and the report `dlm train` ends with both score.

    Raises:
        BaseModelError, OSError: the base model or the adapter cannot be loaded.
    """
    from peft import PeftModel

    from dlm.models import load_model
    from dlm.train.precision import training_device

    return PeftModel.from_pretrained(load_model(ref, device=training_device()), adapter_dir)


def scoring_switches(seed: int) -> None:
    """Set the determinism switches `dlm train` scores its report under
    (`dlm.lock.apply_determinism` with the run's seed, before any model is loaded), so
    `dlm eval` computes the same numbers under the same memo key (the key names the
    switches: `dlm.train.base_score.scoring_environment`) and `dlm eval` right after
    `dlm train` reads the report training saved. Process-global; imports torch."""
    from dlm.lock import apply_determinism

    apply_determinism(seed)


def base_side_memo(store: Store, ref: BaseModelRef, peft_model: Any, tokenizer: Any) -> BaseSideMemo:
    """Where `store` remembers the base side of its evaluations on `ref` as loaded in
    `peft_model` (`dlm.judge.memo`), and where the base model's general-set score is kept
    for every document (`models_dir()/general-scores.json`). Imports torch.

    Raises:
        OSError: the base model's `config.json` cannot be read.
    """
    from dlm.judge.memo import BaseSideMemo, model_inputs
    from dlm.paths import models_dir
    from dlm.tokenize.fingerprint import tokenizer_sha256
    from dlm.train.base_score import model_identity, scoring_environment

    dtype = str(peft_model.get_base_model().dtype)
    return BaseSideMemo(
        store.judge_base_path,
        model_inputs(model_identity(ref.revision, ref.path, dtype), ref.path),
        tokenizer_sha256(tokenizer),
        scoring_environment(),
        models_dir() / "general-scores.json",
    )


def judge_trained(
    doc: Document,
    peft_model: Any,
    tokenizer: Any,
    probes: Sequence[Probe],
    adapter_version: str,
    memo: BaseSideMemo | None = None,
    store: Store | None = None,
    reuse: bool = True,
) -> EvalReport:
    """The evaluation of a peft model whose active adapter was trained on `doc` and saved
    as `adapter_version`; `memo`: where the base model's side is remembered
    (`base_side_memo`); `store`: where whole reports are remembered by adapter
    (`Store.judge_reports_dir`), None to remember no report; `reuse`: False scores every
    side afresh, reading no memo, and writes them back.

    Raises:
        OSError: a memo file cannot be read as bytes or written.
        InstallError: the general probe file or the guard's passages are missing or damaged.
    """
    from dlm.judge.memo import ReportMemo, adapter_files_sha256
    from dlm.judge.report import judge_adapter
    from dlm.train.precision import resolve_precision

    reports = adapter_sha = None
    if store is not None:
        reports = ReportMemo(store.judge_reports_dir)
        adapter_sha = adapter_files_sha256(store.adapter_root / "versions" / adapter_version)

    settings = doc.frontmatter.training.eval
    return judge_adapter(
        peft_model,
        tokenizer,
        eval_items(doc, tokenizer, probes),
        general_texts(),
        adapter_version=adapter_version,
        seed=doc.frontmatter.training.seed,
        max_new_tokens=settings.max_new_tokens,
        general_max_increase=settings.general_max_increase,
        memo=memo,
        reports=reports,
        adapter_sha256=adapter_sha,
        precision=resolve_precision(doc.frontmatter.training.precision),
        reuse=reuse,
        general_probes=general_probes(doc, tokenizer),
        general_samples=settings.general_samples,
    )


def evaluate(
    path: DocPath,
    *,
    adapter_version: str | None = None,
    record: bool = True,
    recompute: bool = False,
    notify: Callable[[str], None] | None = None,
) -> EvalReport:
    """Evaluate the document's adapter (`current`, or `adapter_version`). A report
    remembered for this adapter under the same inputs (`dlm.judge.memo`, as `dlm train`
    leaves it) is returned without scoring; `recompute` scores every side afresh, reads no
    memo and writes both back. `notify` receives each note about the rows before scoring
    starts (`BuiltRows.walk.notes`: probes that repeat a pair, sources skipped; and
    `judging_notes`: many questions and what judging them costs).

    Returns:
        The `dlm.judge.report.EvalReport`: per kind, items passed on base, adapter and null
        adapter and mean reference log-probabilities; every item's replies; the guard.

    Raises:
        DocError, BaseModelError: the document or its base model cannot be loaded.
        StoreError: no adapter yet, or `adapter_version` is not in the store.
    """
    from dlm.metrics import MetricsDB
    from dlm.models import load_tokenizer, resolve_base_model
    from dlm.rows.build import build_rows

    doc, store = open_document(path)
    version = adapter_version or store.current_version()
    if version is None:
        raise StoreError(f"{doc.path}: no trained adapter yet; run `dlm train {doc.path}` first")
    if version not in store.versions():
        known = ", ".join(store.versions()) or "none"
        raise StoreError(f"--adapter-version {version}: not in {store.adapter_root} (versions: {known})")
    ref = resolve_base_model(doc.frontmatter.base_model, relative_to=doc_dir(doc))
    tokenizer = load_tokenizer(ref)
    built = build_rows(doc, tokenizer)
    probes = built.probes
    if notify is not None:
        for note in [*built.walk.notes, *judging_notes(doc, tokenizer, probes)]:
            notify(note)
    scoring_switches(doc.frontmatter.training.seed)
    model = scored_adapter(ref, store.adapter_root / "versions" / version)
    memo = base_side_memo(store, ref, model, tokenizer)
    report = judge_trained(doc, model, tokenizer, probes, version, memo, store, reuse=not recompute)
    if record:
        run_id = _run_of(store, version)
        with MetricsDB(store.metrics_path) as metrics:
            metrics.log_judgement(
                run_id=run_id, adapter_version=version, phase="final", step=None, summary=summary_of(report)
            )
    return report


def summary_of(report: EvalReport) -> dict[str, Any]:
    """What `metrics.sqlite` keeps of a report: per-kind counts, the guard, the general
    probes' counts and ids (not their replies) and the warnings."""
    data = report.as_dict()
    probes = data.get("general_probes")
    counts = {k: v for k, v in probes.items() if k != "items"} if probes else None
    return {"kinds": data["kinds"], "general": data["general"], "general_probes": counts, "warnings": data["warnings"]}


def _run_of(store: Any, version: str) -> str | None:
    for entry in store.read_manifest().get("adapters", []):
        if entry.get("version") == version:
            return str(entry.get("run_id"))
    return None

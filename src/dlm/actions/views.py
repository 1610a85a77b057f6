"""`dlm show` and `dlm metrics`: what a document holds, as plain dicts, no rendering.

The CLI prints them as tables or, with `--json`, as they are; the keys here are the
JSON contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlm.actions.cache import document_cache_summary
from dlm.actions.common import DocPath, doc_dir, open_document
from dlm.doc import Document
from dlm.doc.checks import pair_notes
from dlm.errors import UsageError
from dlm.metrics import MetricsDB
from dlm.rows.build import document_facts, drawn_synth, synth_by_source, teacher_notes
from dlm.rows.teacherstore import document_units, teacher_entries
from dlm.rows.walk import walk_sources


def _rows_by_kind(doc: Document) -> tuple[dict[str, Any], list[str]]:
    """Rows per kind, and one line per notable skip of the sources (the walk's, and
    files `training.synth` could not parse)."""
    from dlm.doc import InstructionSection, ProseSection

    prose = sum(isinstance(s, ProseSection) for s in doc.sections)
    pairs = sum(len(s.pairs) for s in doc.sections if isinstance(s, InstructionSection))
    base_dir = doc_dir(doc) or Path.cwd()
    walk = walk_sources(doc.frontmatter.training.sources, base_dir, doc_name=str(doc.path))
    drawn = drawn_synth(doc.frontmatter.training.synth, walk.files, document_facts(doc, walk.notes))
    synth_pairs, synth_probes = (len(drawn.train), len(drawn.probes)) if drawn is not None else (0, 0)
    teacher = doc.frontmatter.training.synth.teacher
    entries = teacher_entries(teacher, document_units(doc, walk.files)) if teacher is not None else []
    unasked = [e.unit.where for e in entries if e.reply is None]
    return {
        "prose": prose,
        "instruction": pairs,
        "source_files": len(walk.files),
        "synth_pairs": synth_pairs,
        "synth_probes": synth_probes,
        "synth_by_source": synth_by_source(drawn),
        "teacher_pairs": sum(len(e.pairs) for e in entries),
        "teacher_unasked": len(unasked),
    }, [*pair_notes(doc), *walk.notes, *(drawn.notes if drawn is not None else ()), *teacher_notes(doc, unasked)]


def show(path: DocPath) -> dict[str, Any]:
    """Identity, rows, adapters and last run of the document at `path`.

    Keys: dlm_id, path, base_model, store_path, rows{prose, instruction, source_files,
    synth_pairs, synth_probes, synth_by_source, teacher_pairs, teacher_unasked} (`instruction` counts the document's own
    pairs; `synth_*` the `training.synth` training pairs and probes, 0 when it is off;
    `synth_by_source` the same per source kind, `{"go": {"pairs": 12, "probes": 3},
    "markdown": ..., "document": ...}`, `{}` when it is off; `teacher_pairs` the
    `training.synth.teacher` pairs remembered, `teacher_unasked` the sections not asked
    yet, both 0 without a teacher),
    adapter{current, versions}, last_run (or None), training_cache (or None), notes (one
    line per source the rows skip notably: an escaping symlink, a file synth cannot parse).

    Raises:
        DocError: the document cannot be parsed. SourceError: a source directive cannot be walked.
    """
    doc, store = open_document(path)
    fm = doc.frontmatter
    last_run = None
    if store.metrics_path.exists():
        with MetricsDB(store.metrics_path) as db:
            runs = db.runs()
        if runs:
            last = runs[-1]
            last_run = {
                k: last[k]
                for k in (
                    "run_id",
                    "status",
                    "started_at",
                    "finished_at",
                    "steps",
                    "train_loss",
                    "tokens_per_second",
                    "adapter_version",
                )
            }
    rows, notes = _rows_by_kind(doc)
    return {
        "dlm_id": fm.dlm_id,
        "path": str(doc.path) if doc.path else None,
        "base_model": fm.base_model,
        "store_path": str(store.root),
        "rows": rows,
        "adapter": {"current": store.current_version(), "versions": store.versions()},
        "last_run": last_run,
        "training_cache": document_cache_summary(store),
        "notes": notes,
    }


def metrics(path: DocPath, run_id: str | None = None) -> dict[str, Any]:
    """Every run of the document at `path` (only run `run_id` when given), with per-step
    loss, held-out loss measurements and its tokenization phase.

    Keys: dlm_id, runs[{run_id, status, started_at, finished_at, steps, train_loss,
    tokens_per_second, train_tokens, adapter_version, rows, files_taken, files_skipped,
    heldout_rows, real_token_fraction, steps_logged[{step, loss, learning_rate, tokens_seen,
    seconds}], evals[{phase, step, loss, perplexity, rows, tokens, loss_tokens,
    instruction_loss}], kind_losses[{step, kind, loss, tokens}] (train loss per row kind
    over each logging window), checkpoint (an interrupted run's latest checkpoint folder,
    else None), tokenization{...}}].

    Raises:
        DocError: the document cannot be parsed.
        UsageError: no run has the id `run_id`.
    """
    store = open_document(path)[1]
    runs: list[dict[str, Any]] = []
    if store.metrics_path.exists():
        with MetricsDB(store.metrics_path) as db:
            runs = db.runs()
    if run_id is not None:
        known = ", ".join(r["run_id"] for r in runs) or "none"
        runs = [r for r in runs if r["run_id"] == run_id]
        if not runs:
            raise UsageError(f"no run {run_id!r} in this document's metrics (runs: {known})")
    return {"dlm_id": store.dlm_id, "runs": runs}


def plot_metrics(path: DocPath, out: Path, run_id: str | None = None) -> Path:
    """Draw the loss curves of the document's runs (only run `run_id` when given) into the
    PNG `out` (`dlm.metrics.plot` says what it shows). Returns `out`.

    Raises:
        DocError: the document cannot be parsed.
        UsageError: no run has the id `run_id`.
    """
    from dlm.metrics.plot import render_loss_plot

    runs = metrics(path, run_id)["runs"]
    return render_loss_plot(runs, Path(out), title=f"{Path(path).name} ({len(runs)} runs)")

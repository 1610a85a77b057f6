"""`dlm show` and `dlm metrics`: what a document holds, as plain dicts, no rendering.

The CLI prints them as tables or, with `--json`, as they are; the keys here are the
JSON contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlm.actions.common import DocPath, doc_dir, open_document
from dlm.cache import cache_summary
from dlm.doc import Document
from dlm.metrics import MetricsDB
from dlm.rows.walk import walk_sources


def _rows_by_kind(doc: Document) -> dict[str, int]:
    from dlm.doc import InstructionSection, ProseSection

    prose = sum(isinstance(s, ProseSection) for s in doc.sections)
    pairs = sum(len(s.pairs) for s in doc.sections if isinstance(s, InstructionSection))
    base_dir = doc_dir(doc) or Path.cwd()
    walk = walk_sources(doc.frontmatter.training.sources, base_dir, doc_name=str(doc.path))
    return {"prose": prose, "instruction": pairs, "source_files": len(walk.files)}



def show(path: DocPath) -> dict[str, Any]:
    """Identity, rows, adapters and last run of the document at `path`.

    Keys: dlm_id, path, base_model, store_path, rows{prose, instruction, source_files},
    adapter{current, versions}, last_run (or None), training_cache (or None).

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
            last_run = {k: last[k] for k in (
                "run_id", "status", "started_at", "finished_at", "steps", "train_loss",
                "tokens_per_second", "adapter_version")}
    return {
        "dlm_id": fm.dlm_id,
        "path": str(doc.path) if doc.path else None,
        "base_model": fm.base_model,
        "store_path": str(store.root),
        "rows": _rows_by_kind(doc),
        "adapter": {"current": store.current_version(), "versions": store.versions()},
        "last_run": last_run,
        "training_cache": cache_summary(store.cache_dir),
    }


def metrics(path: DocPath) -> dict[str, Any]:
    """Every run of the document at `path`, with per-step loss and its tokenization phase.

    Keys: dlm_id, runs[{run_id, status, started_at, finished_at, steps, train_loss,
    tokens_per_second, train_tokens, adapter_version, rows, files_taken, files_skipped,
    steps_logged[{step, loss, learning_rate, tokens_seen, seconds}], tokenization{...}}].

    Raises:
        DocError: the document cannot be parsed.
    """
    store = open_document(path)[1]
    runs: list[dict[str, Any]] = []
    if store.metrics_path.exists():
        with MetricsDB(store.metrics_path) as db:
            runs = db.runs()
    return {"dlm_id": store.dlm_id, "runs": runs}

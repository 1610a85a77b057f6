"""Data behind `dlm show` and `dlm metrics`: plain dicts, no rendering.

The CLI prints them as tables or, with `--json`, as they are; the keys here are the
JSON contract.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlm.cache.document import document_cache_summary
from dlm.metrics import MetricsDB
from dlm.sources.walk import walk_sources
from dlm.store import Store


def _rows_by_kind(doc: Any) -> dict[str, int]:
    from dlm.doc import InstructionSection, ProseSection

    prose = sum(isinstance(s, ProseSection) for s in doc.sections)
    pairs = sum(len(s.pairs) for s in doc.sections if isinstance(s, InstructionSection))
    base_dir = doc.path.parent if doc.path else Path.cwd()
    walk = walk_sources(doc.frontmatter.training.sources, base_dir, doc_name=str(doc.path))
    return {"prose": prose, "instruction": pairs, "source_files": len(walk.files)}



def show_view(doc: Any, store: Store) -> dict[str, Any]:
    """Identity, rows, adapters and last run of a document.

    Keys: dlm_id, path, base_model, store_path, rows{prose, instruction, source_files},
    adapter{current, versions}, last_run (or None), training_cache (or None).
    """
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
        "training_cache": document_cache_summary(store),
    }


def metrics_view(store: Store) -> dict[str, Any]:
    """Every run with per-step loss and its tokenization phase.

    Keys: dlm_id, runs[{run_id, status, started_at, finished_at, steps, train_loss,
    tokens_per_second, train_tokens, adapter_version, rows, files_taken, files_skipped,
    steps_logged[{step, loss, learning_rate, tokens_seen, seconds}], tokenization{...}}].
    """
    runs: list[dict[str, Any]] = []
    if store.metrics_path.exists():
        with MetricsDB(store.metrics_path) as db:
            runs = db.runs()
    return {"dlm_id": store.dlm_id, "runs": runs}

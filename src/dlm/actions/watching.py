"""`dlm train --watch`: train, then re-train whenever the document or its sources change.

One file watcher (`watchfiles`, OS notifications) stays open for the whole session, so
an edit made while a cycle trains is not lost: it starts the next cycle. Watched: the
document's folder (only the document itself counts) and every `training.sources` root
(every file under it counts; the walker's include/exclude rules decide what trains).
Changes are debounced (`debounce_ms`) so a save that touches several files is one cycle.

Each cycle is a whole `train_document` call: the tokenized-section cache makes a cycle
after a one-file edit re-tokenize that one file. A cycle that fails on bad input (a
half-written document, a source error) is reported and the session keeps watching; the
adapter of the last good cycle stays current. Ctrl-C ends the session cleanly, between
cycles or inside one (an interrupted run changes nothing in the store).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.actions.common import DocPath
from dlm.errors import DlmError

DEBOUNCE_MS = 800
POLL_MS = 300


@dataclass(frozen=True)
class Cycle:
    """One training cycle: its number (1-based), the paths whose change started it
    (empty for the first), and its `TrainReport` or the error that stopped it."""

    number: int
    changed: list[str]
    report: Any = None
    error: str | None = None


@dataclass
class WatchSummary:
    """How the session ended: cycles run, the adapter version left current (None when
    no cycle succeeded) and whether Ctrl-C ended it."""

    cycles: int = 0
    current_version: str | None = None
    interrupted: bool = False
    errors: list[str] = field(default_factory=list)


def watch(
    path: DocPath,
    *,
    on_cycle: Callable[[Cycle], None],
    max_steps: int | None = None,
    use_cache: bool = True,
    strict_sources: bool = False,
    lock_mode: Any = None,
    judge: bool = True,
    sink: Any = None,
    stop_event: threading.Event | None = None,
) -> WatchSummary:
    """`dlm train --watch` on the document at `path`: `dlm.actions.training.train_document`
    at every cycle with these options (see `train` for their meaning).

    Raises:
        DocError: the document cannot be read before the first cycle.
    """
    from dlm.actions.training import TrainOptions, train_document

    options = TrainOptions(
        max_steps=max_steps, use_cache=use_cache, strict_sources=strict_sources, lock_mode=lock_mode, judge=judge
    )
    return watch_and_train(Path(path), lambda doc: train_document(doc, options, sink), on_cycle, stop_event=stop_event)


def watch_targets(doc: Any) -> tuple[list[Path], Callable[[Any, str], bool]]:
    """Folders to watch for `doc` and the filter `(change, path) -> counts?` over their events."""
    from dlm.rows.walk import expand_source_path

    doc_path = Path(doc.path).resolve()
    roots = [expand_source_path(s.path, doc_path.parent) for s in doc.frontmatter.training.sources]
    roots = [r for r in roots if r.is_dir()]
    prefixes = tuple(str(r) + "/" for r in roots)

    def counts(_change: Any, path: str) -> bool:
        return path == str(doc_path) or path.startswith(prefixes)

    return [doc_path.parent, *roots], counts


def watch_and_train(
    doc_path: Path,
    train: Callable[[Any], Any],
    on_cycle: Callable[[Cycle], None],
    *,
    stop_event: threading.Event | None = None,
    debounce_ms: int = DEBOUNCE_MS,
) -> WatchSummary:
    """Run cycles until `stop_event` is set or Ctrl-C (see module docstring).

    Args:
        doc_path: the `.dlm` file, re-read at every cycle.
        train: `train(doc) -> TrainReport` (the caller binds options and sink).
        on_cycle: called after every cycle, from this thread.

    Raises:
        DocError: the document cannot be read before the first cycle (nothing to watch).
    """
    from watchfiles import watch

    from dlm.doc import load_document

    summary = WatchSummary()
    doc = load_document(doc_path)
    changed: list[str] = []
    pending = True
    try:
        while True:
            targets, counts = watch_targets(doc)
            for changes in watch(
                *targets,
                watch_filter=counts,
                debounce=debounce_ms,
                stop_event=stop_event,
                yield_on_timeout=True,
                rust_timeout=POLL_MS,
            ):
                if changes:
                    pending = True
                    changed = sorted({path for _, path in changes})
                if not pending:
                    continue
                pending = False
                doc = _cycle(doc_path, doc, train, on_cycle, summary, changed)
                if watch_targets(doc)[0] != targets:
                    break  # the sources moved: watch the new folders
            else:
                return summary  # stop_event was set
    except KeyboardInterrupt:
        summary.interrupted = True
        return summary


def _cycle(
    doc_path: Path,
    doc: Any,
    train: Callable[[Any], Any],
    on_cycle: Callable[[Cycle], None],
    summary: WatchSummary,
    changed: list[str],
) -> Any:
    """One cycle; returns the document it read (the previous one if it could not be read)."""
    from dlm.doc import load_document

    summary.cycles += 1
    try:
        doc = load_document(doc_path)
        report = train(doc)
    except DlmError as exc:
        summary.errors.append(str(exc))
        on_cycle(Cycle(summary.cycles, changed, error=str(exc)))
        return doc
    summary.current_version = report.adapter_version
    on_cycle(Cycle(summary.cycles, changed, report=report))
    return doc

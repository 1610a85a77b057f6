"""Serving a newly published adapter version without a restart.

`dlm train` publishes a version by replacing the store's `adapter/current` pointer
atomically (`dlm.store`). `AdapterReloader` reads each served document's pointer
every `interval` seconds (a read of a few bytes per document); when it names a new
version, the document's frontmatter is read again (its `system_prompt` belongs with
the adapter trained from it), the new adapter is loaded under a new peft name beside
the old one, the catalog entry is replaced, and the old adapter is deleted, all while
holding the catalog's lock, which a generation holds for its whole run: a generation
in flight finishes with the version (and system prompt) it started with, the next one
uses the new ones. Editing the document without retraining changes nothing served:
the adapter being served was trained with the old text.

Before loading, the new version's files are checked against the hash training recorded
(`dlm.infer.integrity`); a mismatch is a failure like any other.

Failures are per document and never end the polling: a pointer naming a missing
version, an unreadable store or document, a damaged adapter, one that fails to load. The document
keeps serving its last good version, the check is retried at every poll, and
`ReloadStatus` holds the failure's one line until a check succeeds: `/health` says
`degraded` and lists it, `/metrics` shows `dlm_adapter_reload_failing{model}` = 1
(`dlm.serve.metrics`). The log gets one warning when a document starts failing or
fails differently, and one info line when it reloads again; never a line per poll
(the traceback goes to the debug level).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from dlm.defaults import DEFAULT_RELOAD_INTERVAL
from dlm.errors import DlmError, ServeError, StoreError
from dlm.infer.adapters import adapter_name
from dlm.infer.integrity import verify_adapter
from dlm.serve.catalog import Catalog, ServedModel
from dlm.store import Store, open_store

log = logging.getLogger("dlm.serve")


class AdapterHost(Protocol):
    """A model that can add and free named adapters (`dlm.infer.decode.TorchEngine`)."""

    def load_adapter(self, adapter_dir: Path, name: str) -> None: ...

    def delete_adapter(self, name: str) -> None: ...


class ReloadStatus:
    """What reloading did, per served model id; thread-safe (the reload thread writes,
    `/health` and `/metrics` read).

    Attributes (read through the methods): the current failure line of each failing
    model, and counts of versions swapped in and of failed checks.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing: dict[str, str] = {}
        self._reloads: dict[str, int] = {}
        self._failures: dict[str, int] = {}

    def failed(self, model_id: str, line: str) -> bool:
        """Record a failed check; True when it is news (the model was fine, or failed otherwise)."""
        with self._lock:
            self._failures[model_id] = self._failures.get(model_id, 0) + 1
            news = self._failing.get(model_id) != line
            self._failing[model_id] = line
            return news

    def succeeded(self, model_id: str) -> bool:
        """Record a clean check; True when the model was failing until now."""
        with self._lock:
            return self._failing.pop(model_id, None) is not None

    def reloaded(self, model_id: str) -> None:
        """Count a version swapped in."""
        with self._lock:
            self._reloads[model_id] = self._reloads.get(model_id, 0) + 1

    def failing(self) -> dict[str, str]:
        """Model id -> the one line of its current failure (empty: every reload works)."""
        with self._lock:
            return dict(self._failing)

    def counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """(versions swapped in, failed checks), by model id."""
        with self._lock:
            return dict(self._reloads), dict(self._failures)


def document_system_prompt(path: Path, dlm_id: str) -> str | None:
    """The `system_prompt` in the frontmatter of the document at `path` (its body is not
    read: the adapter was trained from it already).

    Raises:
        ServeError: the file cannot be read, its frontmatter has problems, or it now
            names another `dlm_id` (one line naming the file and the way out).
    """
    from dlm.doc.frontmatter import read_frontmatter, split_text
    from dlm.doc.problems import DocProblem

    try:
        text = path.read_text(encoding="utf-8").removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise ServeError(f"{path}: cannot read the document ({getattr(exc, 'strerror', None) or exc})") from None
    split = split_text(text)
    frontmatter = read_frontmatter(split.yaml_text) if not isinstance(split, DocProblem) else [split]
    if isinstance(frontmatter, list):
        raise ServeError(f"{sorted(frontmatter)[0].render(str(path))} (the frontmatter); fix it")
    if frontmatter.dlm_id != dlm_id:
        raise ServeError(
            f"{path}: names dlm_id {frontmatter.dlm_id}, but this server serves it as {dlm_id}; restart `dlm serve`"
        )
    return frontmatter.system_prompt


class AdapterReloader:
    """Polls the stores of `catalog`'s documents and swaps in new adapter versions.

    Args:
        catalog: the served models (entries with an adapter and a `dlm_id` are watched).
        host: where adapters are loaded. interval: seconds between polls.
        stores: opens a document's store by `dlm_id` (default `dlm.store.open_store`).
        status: where failures and reloads are recorded (default: a new one).
    """

    def __init__(
        self,
        catalog: Catalog,
        host: AdapterHost,
        *,
        interval: float = DEFAULT_RELOAD_INTERVAL,
        stores: Callable[[str], Store] = open_store,
        status: ReloadStatus | None = None,
    ):
        self.catalog = catalog
        self.host = host
        self.interval = interval
        self.stores = stores
        self.status = status if status is not None else ReloadStatus()
        self.reloads = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check_once(self) -> list[str]:
        """Load every version published since the last check; the ids of the models
        reloaded. A failure is recorded per document (module docstring) and leaves
        its served version in place; it never raises."""
        reloaded = []
        for model in self.catalog.models():
            if model.adapter is None or model.dlm_id is None:
                continue
            try:
                if self._check(model):
                    reloaded.append(model.id)
            except Exception as exc:  # one document's broken publication must not stop the others
                self._failed(model, exc)
                continue
            if self.status.succeeded(model.id):
                log.info("%s: reloads again; serving adapter %s", model.id, self.catalog.get(model.id).adapter_version)
        return reloaded

    def _check(self, model: ServedModel) -> bool:
        assert model.dlm_id is not None
        store = self.stores(model.dlm_id)
        version = store.current_version()
        if version is None or version == model.adapter_version:
            return False
        folder = store.adapter_root / "versions" / version
        way_out = "retrain with `dlm train`"
        verify_adapter(store, version, folder, way_out=way_out, error=StoreError)
        system_prompt = model.system_prompt
        if model.path is not None:
            system_prompt = document_system_prompt(model.path, model.dlm_id)
        self._swap(model, version, folder, system_prompt)
        return True

    def _failed(self, model: ServedModel, exc: Exception) -> None:
        what = str(exc) if isinstance(exc, DlmError) else f"{type(exc).__name__}: {exc}"
        first = what.splitlines()[0] if what.strip() else type(exc).__name__
        line = f"{model.id}: cannot reload: {first} (still serving {model.adapter_version})"
        if self.status.failed(model.id, line):
            log.warning("%s", line)
            log.debug("%s: reload failure", model.id, exc_info=exc)

    def _swap(self, model: ServedModel, version: str, folder: Path, system_prompt: str | None) -> None:
        assert model.dlm_id is not None and model.adapter is not None
        name = adapter_name(model.dlm_id, version)
        with self.catalog.lock:
            self.host.load_adapter(folder, name)
            new = dataclasses.replace(model, adapter=name, adapter_version=version, system_prompt=system_prompt)
            self.catalog.replace(new)
            self.host.delete_adapter(model.adapter)
        self.reloads += 1
        self.status.reloaded(model.id)
        log.info("%s: now serving adapter %s (was %s)", model.id, version, model.adapter_version)

    def start(self) -> None:
        """Poll on a daemon thread until `stop()`."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="dlm-adapter-reload", daemon=True)
            self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """End polling (waits for a reload in progress, up to `timeout` seconds)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.check_once()

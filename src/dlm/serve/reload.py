"""Serving a newly published adapter version without a restart.

`dlm train` publishes a version by replacing the store's `adapter/current` pointer
atomically (`dlm.store`). `AdapterReloader` reads each served document's pointer
every `interval` seconds (a read of a few bytes per document); when it names a new
version, the new adapter is loaded under a new peft name beside the old one, the
catalog entry is replaced, and the old adapter is deleted, all while holding the
catalog's lock, which a generation holds for its whole run: a generation in flight
finishes with the version it started with, the next one uses the new version. A
version that fails to load is logged and retried at the next poll; the old one
keeps serving.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from dlm.defaults import DEFAULT_RELOAD_INTERVAL
from dlm.infer.adapters import adapter_name
from dlm.serve.catalog import Catalog, ServedModel
from dlm.store import Store, open_store

log = logging.getLogger("dlm.serve")


class AdapterHost(Protocol):
    """A model that can add and free named adapters (`dlm.infer.decode.TorchEngine`)."""

    def load_adapter(self, adapter_dir: Path, name: str) -> None: ...

    def delete_adapter(self, name: str) -> None: ...


class AdapterReloader:
    """Polls the stores of `catalog`'s documents and swaps in new adapter versions.

    Args:
        catalog: the served models (entries with an adapter and a `dlm_id` are watched).
        host: where adapters are loaded. interval: seconds between polls.
        stores: opens a document's store by `dlm_id` (default `dlm.store.open_store`).
    """

    def __init__(
        self,
        catalog: Catalog,
        host: AdapterHost,
        *,
        interval: float = DEFAULT_RELOAD_INTERVAL,
        stores: Callable[[str], Store] = open_store,
    ):
        self.catalog = catalog
        self.host = host
        self.interval = interval
        self.stores = stores
        self.reloads = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check_once(self) -> list[str]:
        """Load every version published since the last check; the ids of the models
        reloaded. A failure is logged and leaves the served version in place."""
        reloaded = []
        for model in self.catalog.models():
            if model.adapter is None or model.dlm_id is None:
                continue
            store = self.stores(model.dlm_id)
            version = store.current_version()
            folder = store.current_adapter_dir()
            if version is None or folder is None or version == model.adapter_version:
                continue
            try:
                self._swap(model, version, folder)
            except Exception:  # a broken publication must not stop the server
                log.exception(
                    "%s: could not load adapter %s; still serving %s", model.id, version, model.adapter_version
                )
                continue
            reloaded.append(model.id)
        return reloaded

    def _swap(self, model: ServedModel, version: str, folder: Path) -> None:
        assert model.dlm_id is not None and model.adapter is not None
        name = adapter_name(model.dlm_id, version)
        with self.catalog.lock:
            self.host.load_adapter(folder, name)
            self.catalog.replace(dataclasses.replace(model, adapter=name, adapter_version=version))
            self.host.delete_adapter(model.adapter)
        self.reloads += 1
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

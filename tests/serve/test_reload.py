"""`AdapterReloader`: a version published in a real store is loaded beside the old one,
swapped into the catalog and the old adapter freed, under the lock generations hold;
a version that fails to load leaves the old one serving. A recording host stands in
for the model (the real model's reload is in test_many_documents.py)."""

from __future__ import annotations

import threading
from pathlib import Path

from dlm.infer.adapters import adapter_name
from dlm.serve.catalog import Catalog, ServedModel
from dlm.serve.reload import AdapterReloader
from dlm.store import open_store

DLM_ID = "01JA0000000000000000000000"


class RecordingHost:
    def __init__(self, catalog_lock: threading.RLock, fail: bool = False):
        self.lock = catalog_lock
        self.fail = fail
        self.calls: list[tuple[str, str]] = []

    def load_adapter(self, adapter_dir: Path, name: str) -> None:
        assert self.lock._is_owned()  # type: ignore[attr-defined]  # no generation can run meanwhile
        if self.fail:
            raise OSError("truncated safetensors")
        self.calls.append(("load", name))

    def delete_adapter(self, name: str) -> None:
        assert self.lock._is_owned()  # type: ignore[attr-defined]
        self.calls.append(("delete", name))


def publish(version_note: str) -> str:
    store = open_store(DLM_ID)
    staging = store.new_staging_dir(version_note)
    (staging / "adapter_config.json").write_text("{}")
    version, _ = store.commit_version(staging)
    return version


def served(version: str) -> ServedModel:
    return ServedModel(f"dlm:{DLM_ID}", None, adapter_name(DLM_ID, version), "notes", DLM_ID, version, "base")


def test_a_published_version_is_swapped_in_and_the_old_one_freed() -> None:
    first = publish("one")
    catalog = Catalog([served(first), ServedModel("base", base="base")])
    host = RecordingHost(catalog.lock)
    reloader = AdapterReloader(catalog, host)
    assert reloader.check_once() == []  # nothing new
    second = publish("two")
    assert reloader.check_once() == [f"dlm:{DLM_ID}"]
    assert host.calls == [("load", adapter_name(DLM_ID, second)), ("delete", adapter_name(DLM_ID, first))]
    assert catalog.resolve("notes") == served(second)
    assert reloader.check_once() == []


def test_a_version_that_fails_to_load_leaves_the_old_one_serving() -> None:
    first = publish("one")
    catalog = Catalog([served(first)])
    reloader = AdapterReloader(catalog, RecordingHost(catalog.lock, fail=True))
    publish("two")
    assert reloader.check_once() == []
    assert catalog.resolve("notes") == served(first)

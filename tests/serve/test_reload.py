"""`AdapterReloader`: a version published in a real store is loaded beside the old one,
swapped into the catalog and the old adapter freed, under the lock generations hold;
a version that fails to load leaves the old one serving. A recording host stands in
for the model (the real model's reload is in test_many_documents.py)."""

from __future__ import annotations

import threading
import time
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


OTHER_ID = "01JA0000000000000000000001"


def publish_for(dlm_id: str, note: str) -> str:
    store = open_store(dlm_id)
    staging = store.new_staging_dir(note)
    (staging / "adapter_config.json").write_text("{}")
    version, _ = store.commit_version(staging)
    return version


def served_doc(dlm_id: str, version: str, name: str, path: Path | None = None, system: str | None = None):
    return ServedModel(f"dlm:{dlm_id}", system, adapter_name(dlm_id, version), name, dlm_id, version, "base", path=path)


def break_pointer(dlm_id: str) -> tuple[Path, str]:
    pointer = open_store(dlm_id).adapter_root / "current"
    good = pointer.read_text()
    pointer.write_text("v9999\n")
    return pointer, good


def test_a_broken_pointer_in_one_document_never_stops_the_others() -> None:
    a, b = publish_for(DLM_ID, "a1"), publish_for(OTHER_ID, "b1")
    catalog = Catalog([served_doc(DLM_ID, a, "a"), served_doc(OTHER_ID, b, "b")])
    reloader = AdapterReloader(catalog, RecordingHost(catalog.lock))
    pointer, good = break_pointer(DLM_ID)
    b2 = publish_for(OTHER_ID, "b2")
    assert reloader.check_once() == [f"dlm:{OTHER_ID}"]
    assert catalog.resolve("b").adapter_version == b2
    assert catalog.resolve("a").adapter_version == a  # still serving its last good version
    (line,) = reloader.status.failing().values()
    assert str(pointer) in line and "v9999" in line
    pointer.write_text(good)
    assert reloader.check_once() == []
    assert reloader.status.failing() == {}


def test_a_failure_is_logged_once_per_change_without_traceback(caplog) -> None:
    import logging

    a = publish_for(DLM_ID, "a1")
    catalog = Catalog([served_doc(DLM_ID, a, "a")])
    reloader = AdapterReloader(catalog, RecordingHost(catalog.lock))
    pointer, good = break_pointer(DLM_ID)
    with caplog.at_level(logging.INFO, logger="dlm.serve"):
        for _ in range(5):
            reloader.check_once()
        pointer.write_text(good)
        for _ in range(3):
            reloader.check_once()
    records = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelname for r in records] == ["WARNING", "INFO"], [r.getMessage() for r in records]
    assert all(r.exc_info is None for r in records)
    assert "\n" not in records[0].getMessage() and "v9999" in records[0].getMessage()
    assert "reloads again" in records[1].getMessage()


def test_the_reload_thread_outlives_a_failure() -> None:
    a, b = publish_for(DLM_ID, "a1"), publish_for(OTHER_ID, "b1")
    catalog = Catalog([served_doc(DLM_ID, a, "a"), served_doc(OTHER_ID, b, "b")])
    reloader = AdapterReloader(catalog, RecordingHost(catalog.lock), interval=0.01)
    pointer, good = break_pointer(DLM_ID)
    reloader.start()
    try:
        deadline = time.monotonic() + 10
        while not reloader.status.failing() and time.monotonic() < deadline:
            time.sleep(0.01)
        pointer.write_text(good)
        a2 = publish_for(DLM_ID, "a2")
        while catalog.resolve("a").adapter_version != a2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert catalog.resolve("a").adapter_version == a2
    finally:
        reloader.stop()


def test_a_reload_takes_the_documents_new_system_prompt(tmp_path: Path) -> None:
    from dlm.doc import load_document, new_document

    path = tmp_path / "notes.dlm"
    path.write_text(new_document(system_prompt="Answer in French."))
    dlm_id = load_document(path).frontmatter.dlm_id
    first = publish_for(dlm_id, "one")
    catalog = Catalog([served_doc(dlm_id, first, "notes", path, "Answer in French.")])
    reloader = AdapterReloader(catalog, RecordingHost(catalog.lock))
    path.write_text(path.read_text().replace("Answer in French.", "Answer in German."))
    assert reloader.check_once() == []  # an edit alone changes nothing: the adapter was trained with the old one
    assert catalog.resolve("notes").system_prompt == "Answer in French."
    second = publish_for(dlm_id, "two")
    assert reloader.check_once() == [f"dlm:{dlm_id}"]
    model = catalog.resolve("notes")
    assert (model.adapter_version, model.system_prompt) == (second, "Answer in German.")


def test_a_document_that_cannot_be_read_keeps_the_old_version_serving(tmp_path: Path) -> None:
    from dlm.doc import load_document, new_document

    path = tmp_path / "notes.dlm"
    path.write_text(new_document(system_prompt="Answer in French."))
    dlm_id = load_document(path).frontmatter.dlm_id
    first = publish_for(dlm_id, "one")
    catalog = Catalog([served_doc(dlm_id, first, "notes", path, "Answer in French.")])
    host = RecordingHost(catalog.lock)
    reloader = AdapterReloader(catalog, host)
    path.write_text("---\nnot: [valid\n---\n")
    publish_for(dlm_id, "two")
    assert reloader.check_once() == [] and host.calls == []
    assert catalog.resolve("notes").adapter_version == first
    (line,) = reloader.status.failing().values()
    assert str(path) in line


def test_reload_failures_show_in_health_and_metrics_over_http(smollm2_tokenizer) -> None:
    import httpx
    from fake_engine import FakeEngine

    from dlm.serve.app import create_app
    from dlm.serve.server import RunningServer

    a = publish_for(DLM_ID, "a1")
    catalog = Catalog([served_doc(DLM_ID, a, "a"), ServedModel("base", base="base")])
    served_app = create_app(FakeEngine(smollm2_tokenizer), catalog=catalog)
    reloader = AdapterReloader(catalog, RecordingHost(catalog.lock), status=served_app.state.reloads)
    gauge = f'dlm_adapter_reload_failing{{model="dlm:{DLM_ID}"}}'
    with RunningServer(served_app.app, "127.0.0.1", 0) as running, httpx.Client(base_url=running.url) as http:
        assert http.get("/health").json() == {"status": "ok", "model": f"dlm:{DLM_ID}"}
        pointer, good = break_pointer(DLM_ID)
        reloader.check_once()
        reloader.check_once()
        health = http.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "degraded"
        (line,) = health.json()["reload_failures"].values()
        assert "v9999" in line and "still serving v0001" in line
        metrics = http.get("/metrics").text
        assert f"{gauge} 1.0" in metrics
        assert f'dlm_adapter_reload_failures_total{{model="dlm:{DLM_ID}"}} 2.0' in metrics
        pointer.write_text(good)
        reloader.check_once()
        assert http.get("/health").json()["status"] == "ok"
        assert f"{gauge} 0.0" in http.get("/metrics").text


def test_tokenize_uses_the_system_prompt_reloaded_with_the_adapter(smollm2_tokenizer, tmp_path: Path) -> None:
    import httpx
    from fake_engine import FakeEngine

    from dlm.doc import load_document, new_document
    from dlm.serve.app import create_app
    from dlm.serve.server import RunningServer

    path = tmp_path / "notes.dlm"
    path.write_text(new_document(system_prompt="Answer in French."))
    dlm_id = load_document(path).frontmatter.dlm_id
    first = publish_for(dlm_id, "one")
    catalog = Catalog([served_doc(dlm_id, first, "notes", path, "Answer in French.")])
    served_app = create_app(FakeEngine(smollm2_tokenizer), catalog=catalog)
    reloader = AdapterReloader(catalog, RecordingHost(catalog.lock), status=served_app.state.reloads)
    body = {"model": "notes", "messages": [{"role": "user", "content": "Hi"}]}
    with RunningServer(served_app.app, "127.0.0.1", 0) as running, httpx.Client(base_url=running.url) as http:
        before = smollm2_tokenizer.decode(http.post("/tokenize", json=body).json()["tokens"])
        assert "Answer in French." in before
        path.write_text(path.read_text().replace("Answer in French.", "Answer in German."))
        publish_for(dlm_id, "two")
        reloader.check_once()
        after = smollm2_tokenizer.decode(http.post("/tokenize", json=body).json()["tokens"])
        assert "Answer in German." in after and "French" not in after


def test_a_new_version_whose_files_differ_from_the_recorded_hash_is_not_loaded() -> None:
    first = publish_for(DLM_ID, "one")
    catalog = Catalog([served_doc(DLM_ID, first, "a")])
    host = RecordingHost(catalog.lock)
    reloader = AdapterReloader(catalog, host)
    second = publish_for(DLM_ID, "two")
    open_store(DLM_ID).record_adapter(
        version=second,
        run_id="two",
        adapter_sha256="sha256:" + "0" * 64,
        base_model="base",
        base_model_revision="r",
        document_path=None,
    )
    assert reloader.check_once() == [] and host.calls == []
    assert catalog.resolve("a").adapter_version == first
    (line,) = reloader.status.failing().values()
    assert "damaged or edited after training" in line and "still serving v0001" in line

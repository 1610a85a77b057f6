from pathlib import Path

import pytest

from dlm.errors import StoreError
from dlm.store import open_store


def publish(store, run_id: str, payload: bytes) -> tuple[str, Path]:
    staging = store.new_staging_dir(run_id)
    (staging / "adapter_model.safetensors").write_bytes(payload)
    return store.commit_version(staging)


def test_versions_and_current_pointer():
    store = open_store("01JD7Z8K2M4N6P8Q0R2S4T6V8W")
    assert store.current_adapter_dir() is None
    assert publish(store, "r1", b"one")[0] == "v0001"
    name, folder = publish(store, "r2", b"two")
    assert name == "v0002" and store.versions() == ["v0001", "v0002"]
    assert store.current_adapter_dir() == folder
    assert (folder / "adapter_model.safetensors").read_bytes() == b"two"


def test_abandoned_staging_never_becomes_current():
    store = open_store("01JD7Z8K2M4N6P8Q0R2S4T6V8W")
    publish(store, "r1", b"one")
    staging = store.new_staging_dir("r2")  # a run killed before publishing
    (staging / "adapter_model.safetensors").write_bytes(b"half")
    assert store.current_version() == "v0001"
    store.new_staging_dir("r3")
    assert not staging.exists()


def test_second_writer_fails_clearly():
    store = open_store("01JD7Z8K2M4N6P8Q0R2S4T6V8W")
    with store.train_lock():
        with pytest.raises(StoreError, match="another `dlm train` is running"):
            with store.train_lock():
                pass
    with store.train_lock():  # released after the first holder
        pass


def test_dangling_pointer_is_a_clear_error():
    store = open_store("01JD7Z8K2M4N6P8Q0R2S4T6V8W")
    publish(store, "r1", b"one")
    (store.adapter_root / "current").write_text("v0009\n")
    with pytest.raises(StoreError, match="points at 'v0009'"):
        store.current_version()


def test_manifest_of_other_document_refused():
    store = open_store("01JD7Z8K2M4N6P8Q0R2S4T6V8W")
    store.write_manifest({"dlm_id": "01JD7Z8K2M4N6P8Q0R2S4T6V8X", "adapters": []})
    with pytest.raises(StoreError, match="belongs to dlm_id"):
        store.read_manifest()

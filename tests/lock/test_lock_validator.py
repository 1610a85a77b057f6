"""The mode x lock-state matrix, mode resolution, and bad lock files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lock_factory import edited, make_lock

from dlm.errors import DlmError, LockValidationError, UsageError
from dlm.lock import (
    LockDecision,
    LockMismatchError,
    LockMode,
    check_lock,
    lock_path,
    read_lock,
    write_lock,
)

ADAPTER_SHA = "sha256:" + "0" * 64


def _store(tmp_path: Path, state: str) -> tuple[Path, bytes | None]:
    """A store holding a lock in `state` relative to `make_lock()`; returns the lock's bytes."""
    store = tmp_path / "store"
    store.mkdir()
    base = make_lock()
    locked = {
        "none": None,
        "match": base,
        "warn": edited(base, "pinned_versions.transformers", "4.57.0"),
        "error": edited(base, "base_model.revision", "sha256:" + "f" * 64),
    }[state]
    if locked is None:
        return store, None
    write_lock(store, locked, run_id="run-1", adapter_sha256=ADAPTER_SHA)
    return store, lock_path(store).read_bytes()


# (mode, lock state) -> (action, should_write, number of warnings) or an exception type
MATRIX = {
    (LockMode.DEFAULT, "none"): ("create", True, 0),
    (LockMode.DEFAULT, "match"): ("match", True, 0),
    (LockMode.DEFAULT, "warn"): ("drift", True, 1),
    (LockMode.DEFAULT, "error"): LockMismatchError,
    (LockMode.STRICT, "none"): ("create", True, 0),
    (LockMode.STRICT, "match"): ("match", True, 0),
    (LockMode.STRICT, "warn"): LockMismatchError,
    (LockMode.STRICT, "error"): LockMismatchError,
    (LockMode.UPDATE, "none"): ("update", True, 0),
    (LockMode.UPDATE, "match"): ("update", True, 0),
    (LockMode.UPDATE, "warn"): ("update", True, 0),
    (LockMode.UPDATE, "error"): ("update", True, 0),
    (LockMode.IGNORE, "none"): ("ignore", False, 0),
    (LockMode.IGNORE, "match"): ("ignore", False, 0),
    (LockMode.IGNORE, "warn"): ("ignore", False, 0),
    (LockMode.IGNORE, "error"): ("ignore", False, 0),
}


@pytest.mark.parametrize(("mode", "state"), list(MATRIX), ids=[f"{m.value}-{s}" for m, s in MATRIX])
def test_mode_by_lock_state(tmp_path: Path, mode: LockMode, state: str) -> None:
    store, before = _store(tmp_path, state)
    expected = MATRIX[(mode, state)]
    if isinstance(expected, type):
        with pytest.raises(expected) as info:
            check_lock(store, make_lock(), mode)
        message = str(info.value)
        assert "--update-lock" in message
        assert " -> " in message  # each mismatch as `field: old -> new`
    else:
        decision = check_lock(store, make_lock(), mode)
        assert isinstance(decision, LockDecision)
        assert (decision.action, decision.should_write, len(decision.warnings)) == expected
    after = lock_path(store).read_bytes() if lock_path(store).exists() else None
    assert after == before  # checking never touches the lock on disk


def test_warn_line_names_field_old_and_new(tmp_path: Path) -> None:
    store, _ = _store(tmp_path, "warn")
    decision = check_lock(store, make_lock(), LockMode.DEFAULT)
    assert decision.warnings == (
        f"dlm.lock: pinned_versions.transformers: 4.57.0 -> 5.23.0 ({decision.mismatches[0].reason})",
    )


def test_error_lists_every_blocking_field(tmp_path: Path) -> None:
    store = tmp_path / "s"
    locked = edited(edited(make_lock(), "base_model.revision", "sha256:" + "f" * 64), "pinned_versions.torch", "1.13.0")
    write_lock(store, locked, run_id="r", adapter_sha256=ADAPTER_SHA)
    with pytest.raises(LockMismatchError) as info:
        check_lock(store, make_lock(), LockMode.DEFAULT)
    fields = [m.field for m in info.value.mismatches]
    assert fields == ["base_model.revision", "pinned_versions.torch"]
    assert "pinned_versions.torch: 1.13.0 -> 2.13.0+cpu" in str(info.value)
    assert info.value.exit_code == 1


def test_allowed_drift_is_reported_without_warning(tmp_path: Path) -> None:
    store = tmp_path / "s"
    write_lock(
        store, edited(make_lock(), "corpus_fingerprint", "sha256:" + "1" * 64), run_id="r", adapter_sha256=ADAPTER_SHA
    )
    decision = check_lock(store, make_lock(), LockMode.STRICT)
    assert decision.action == "drift" and decision.warnings == ()
    assert [m.field for m in decision.mismatches] == ["corpus_fingerprint"]


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        ({}, LockMode.DEFAULT),
        ({"strict": True}, LockMode.STRICT),
        ({"update": True}, LockMode.UPDATE),
        ({"ignore": True}, LockMode.IGNORE),
    ],
)
def test_resolve_lock_mode(flags: dict, mode: LockMode) -> None:
    from dlm.cli.common import lock_mode_from_flags

    assert lock_mode_from_flags(**flags) is mode


@pytest.mark.parametrize(
    "flags",
    [
        {"strict": True, "update": True},
        {"strict": True, "ignore": True},
        {"update": True, "ignore": True},
        {"strict": True, "update": True, "ignore": True},
    ],
)
def test_lock_flags_are_mutually_exclusive(flags: dict) -> None:
    from dlm.cli.common import lock_mode_from_flags

    with pytest.raises(UsageError) as info:
        lock_mode_from_flags(**flags)
    assert info.value.exit_code == 2
    assert "cannot be combined" in str(info.value)


def test_write_lock_records_run_and_adapter(tmp_path: Path) -> None:
    written = write_lock(tmp_path, make_lock(), run_id="run-7", adapter_sha256=ADAPTER_SHA)
    on_disk = read_lock(lock_path(tmp_path))
    assert on_disk == written
    assert (on_disk.last_run_id, on_disk.adapter_sha256) == ("run-7", ADAPTER_SHA)
    text = lock_path(tmp_path).read_text()
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=2, ensure_ascii=False) + "\n"


# ---- damaged, unknown-version and foreign locks -------------------------------------------------


def _good_lock_json(tmp_path: Path) -> dict:
    write_lock(tmp_path, make_lock(), run_id="r", adapter_sha256=ADAPTER_SHA)
    return json.loads(lock_path(tmp_path).read_text())


def _truncated(tmp_path: Path) -> bytes:
    _good_lock_json(tmp_path)
    raw = lock_path(tmp_path).read_bytes()
    return raw[: len(raw) // 2]


def _with(tmp_path: Path, **changes: object) -> bytes:
    data = _good_lock_json(tmp_path)
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    return json.dumps(data).encode()


BAD_LOCKS = {
    "truncated": (_truncated, "not valid JSON"),
    "empty": (lambda p: b"", "not valid JSON"),
    "binary": (lambda p: b"\xff\xfe\x00garbage", "not UTF-8"),
    "not-an-object": (lambda p: b"[1, 2]", "expected a JSON object"),
    "unknown-version": (lambda p: _with(p, lock_version=99), "lock_version 99 is not supported"),
    "no-version": (lambda p: _with(p, lock_version=...), "lock_version None is not supported"),
    "missing-field": (lambda p: _with(p, dlm_sha256=...), "dlm_sha256: missing"),
    "wrong-type": (lambda p: _with(p, seed="forty-two"), "seed:"),
    "bad-tier": (lambda p: _with(p, hardware_tier="tpu"), "hardware_tier:"),
    "unknown-field": (lambda p: _with(p, colour="blue"), "colour: unknown field"),
    "bad-nested": (lambda p: _with(p, base_model={"name": "x"}), "base_model.revision: missing"),
}


@pytest.mark.parametrize("case", list(BAD_LOCKS))
def test_bad_lock_is_a_clear_error_naming_the_way_out(tmp_path: Path, case: str) -> None:
    make_bytes, expected = BAD_LOCKS[case]
    raw = make_bytes(tmp_path)
    lock_path(tmp_path).write_bytes(raw)
    with pytest.raises(LockValidationError) as info:
        check_lock(tmp_path, make_lock(), LockMode.DEFAULT)
    message = str(info.value)
    assert isinstance(info.value, DlmError)
    assert expected in message
    assert "--update-lock" in message and str(lock_path(tmp_path)) in message
    assert "Traceback" not in message and "pydantic" not in message.lower()
    for mode in (LockMode.UPDATE, LockMode.IGNORE):  # the ways out really get past it
        assert check_lock(tmp_path, make_lock(), mode).action == mode.value
    assert lock_path(tmp_path).read_bytes() == raw


def test_foreign_lock_is_refused(tmp_path: Path) -> None:
    other = make_lock(dlm_id="01M82E24HQJBHXQZ3BX9M8Z1JJ")
    write_lock(tmp_path, other, run_id="r", adapter_sha256=ADAPTER_SHA)
    for mode in (LockMode.DEFAULT, LockMode.STRICT):
        with pytest.raises(LockValidationError) as info:
            check_lock(tmp_path, make_lock(), mode)
        message = str(info.value)
        assert "another document" in message and "01M82E24HQJBHXQZ3BX9M8Z1JJ" in message
        assert "--update-lock" in message
    assert check_lock(tmp_path, make_lock(), LockMode.UPDATE).should_write


@pytest.mark.parametrize("mode", [None, LockMode.STRICT])
def test_a_damaged_lock_stops_train_before_anything_is_loaded(
    tmp_path: Path, dlm_home: Path, monkeypatch, mode
) -> None:
    import dlm.actions.training as training
    from dlm.doc import load_document, new_document
    from dlm.store import open_store

    path = tmp_path / "doc.dlm"
    path.write_text(new_document())
    store = open_store(load_document(path).frontmatter.dlm_id)
    store.root.mkdir(parents=True, exist_ok=True)
    lock_path(store.root).write_bytes(b'{"lock_version": 1, "dlm_id"')
    started = []
    monkeypatch.setattr(training, "train_document", lambda *a, **k: started.append(a))
    monkeypatch.setattr(training, "launch_train", lambda *a, **k: started.append(a))
    with pytest.raises(LockValidationError, match=r"dlm\.lock:1:\d+: not valid JSON .*--update-lock"):
        training.train(path, lock_mode=mode, nproc=2)
    assert started == []
    # the modes that do not read the lock start the run as before
    for passing in (LockMode.UPDATE, LockMode.IGNORE):
        training.train(path, lock_mode=passing)
    assert len(started) == 2

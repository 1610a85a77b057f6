"""The lock's distributed fields: recorded from the plan, read back from version-1 locks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lock_factory import make_lock

from dlm.errors import LockValidationError
from dlm.lock import LOCK_VERSION, Severity, diff_locks, read_lock
from dlm.lock.schema import lock_to_json


def test_a_run_on_two_ranks_records_its_shape() -> None:
    lock = make_lock(world_size=2, per_device_batch_size=2, gradient_accumulation_steps=1, backend="gloo")
    data = lock_to_json(lock)
    assert data["lock_version"] == LOCK_VERSION == 2
    assert (
        data["world_size"],
        data["per_device_batch_size"],
        data["gradient_accumulation_steps"],
        data["backend"],
    ) == (2, 2, 1, "gloo")


def _as_v1(lock_json: dict) -> dict:
    old = {
        k: v
        for k, v in lock_json.items()
        if k not in ("world_size", "per_device_batch_size", "gradient_accumulation_steps", "backend")
    }
    return {**old, "lock_version": 1}


def test_a_version_1_lock_reads_as_one_process_with_the_shape_unrecorded(tmp_path: Path) -> None:
    path = tmp_path / "dlm.lock"
    path.write_text(json.dumps(_as_v1(lock_to_json(make_lock()))))
    old = read_lock(path)
    assert (old.lock_version, old.world_size, old.backend) == (2, 1, "none")
    assert old.per_device_batch_size is None and old.gradient_accumulation_steps is None
    new = make_lock(per_device_batch_size=4, gradient_accumulation_steps=1)
    verdicts = {m.field: (m.severity, m.reason) for m in diff_locks(old, new)}
    assert verdicts["per_device_batch_size"][0] is Severity.ALLOW
    assert "lock version 1" in verdicts["per_device_batch_size"][1]
    assert "world_size" not in verdicts and "backend" not in verdicts


def test_a_version_1_lock_missing_a_field_is_still_refused(tmp_path: Path) -> None:
    data = _as_v1(lock_to_json(make_lock()))
    del data["seed"]
    path = tmp_path / "dlm.lock"
    path.write_text(json.dumps(data))
    with pytest.raises(LockValidationError, match="seed: missing"):
        read_lock(path)


def test_a_version_2_lock_without_the_shape_is_refused(tmp_path: Path) -> None:
    data = lock_to_json(make_lock())
    del data["backend"]
    path = tmp_path / "dlm.lock"
    path.write_text(json.dumps(data))
    with pytest.raises(LockValidationError, match="backend: missing"):
        read_lock(path)

"""Every lock field's drift rule, through the real diff of two real locks."""

from __future__ import annotations

import pytest
from lock_factory import edited, make_lock

from dlm.lock import DlmLock, Severity, diff_locks
from dlm.lock.policy import NOT_COMPARED, RULES, judge, rule_for
from dlm.lock.validator import flatten

ALLOW, WARN, ERROR = Severity.ALLOW, Severity.WARN, Severity.ERROR

# (dotted field, new value; None removes a mapping key, expected severity)
CASES = [
    ("dlm_sha256", "sha256:" + "e" * 64, ALLOW),
    ("corpus_fingerprint", "sha256:" + "e" * 64, ALLOW),
    ("hyperparameters_sha256", "sha256:" + "e" * 64, ALLOW),
    ("seed", 7, ALLOW),
    ("base_model.name", "./models/smollm2", ALLOW),
    ("base_model.revision", "sha256:" + "f" * 64, ERROR),
    ("tokenizer_sha256", "sha256:" + "e" * 64, WARN),
    ("pinned_versions.torch", "3.0.0+cpu", ERROR),
    ("pinned_versions.torch", "2.14.0+cpu", WARN),
    ("pinned_versions.torch", "2.13.1+cpu", WARN),
    ("pinned_versions.torch", "2.13.0+cu124", WARN),
    ("pinned_versions.torch", None, ERROR),
    ("pinned_versions.transformers", "5.24.0", WARN),
    ("pinned_versions.peft", "0.22.0", WARN),
    ("pinned_versions.trl", "1.17.0", WARN),
    ("pinned_versions.accelerate", "1.16.0", WARN),
    ("pinned_versions.tokenizers", "0.23.4", WARN),
    ("pinned_versions.datasets", "5.3.0", WARN),
    ("pinned_versions.numpy", "2.5.0", WARN),
    ("pinned_versions.bitsandbytes", "0.45.0", WARN),
    ("pinned_versions.somethingnew", "1.0", WARN),
    ("cuda_version", "12.4", WARN),
    ("rocm_version", "6.1", WARN),
    ("hardware_tier", "cuda", WARN),
    ("cpu_capability", "AVX512", WARN),
    ("torch_threads", 8, WARN),
    ("precision", "bfloat16", WARN),
    ("determinism_class", "best-effort", WARN),
    ("determinism_flags.use_deterministic_algorithms", False, WARN),
    ("determinism_flags.deterministic_warn_only", True, WARN),
    ("determinism_flags.cudnn_deterministic", False, WARN),
    ("determinism_flags.cudnn_benchmark", True, WARN),
    ("determinism_flags.cublas_workspace_config", None, WARN),
    ("determinism_flags.full_determinism", False, WARN),
    ("world_size", 2, WARN),
    ("per_device_batch_size", 4, ALLOW),
    ("gradient_accumulation_steps", 2, ALLOW),
    ("backend", "gloo", WARN),
]


def _edit(lock: DlmLock, field: str, value: object) -> DlmLock:
    if field.startswith("determinism_flags.") and value is None:
        data = lock.model_dump(mode="json")
        data["determinism_flags"][field.split(".")[1]] = None
        return DlmLock.model_validate(data)
    return edited(lock, field, value)


@pytest.mark.parametrize(("field", "new", "severity"), CASES, ids=[f"{c[0]}={c[1]}" for c in CASES])
def test_each_field_drift_has_its_severity(field: str, new: object, severity: Severity) -> None:
    old = make_lock()
    changed = _edit(old, field, new)
    mismatches = diff_locks(old, changed)
    assert [(m.field, m.severity) for m in mismatches] == [(field, severity)]
    assert mismatches[0].reason  # every verdict explains itself


def test_bitsandbytes_appearing_and_vanishing_warn() -> None:
    without = make_lock()
    with_bnb = edited(without, "pinned_versions.bitsandbytes", "0.45.0")
    for old, new in ((without, with_bnb), (with_bnb, without)):
        (m,) = diff_locks(old, new)
        assert (m.field, m.severity) == ("pinned_versions.bitsandbytes", WARN)
    assert "installed" in diff_locks(without, with_bnb)[0].reason


def test_identical_locks_have_no_mismatch() -> None:
    assert diff_locks(make_lock(), make_lock()) == ()


def test_record_only_fields_are_not_compared() -> None:
    old = make_lock()
    new = old.model_copy(
        update={"created_at": "2000-01-01T00:00:00+00:00", "last_run_id": "r9", "adapter_sha256": "sha256:" + "9" * 64}
    )
    assert diff_locks(old, new) == ()


def test_every_schema_field_is_ruled_or_explicitly_not_compared() -> None:
    lock = edited(make_lock(), "pinned_versions.bitsandbytes", "0.45.0")
    for field in flatten(lock):
        rule_for(field)  # raises KeyError for a field without a rule
    top_level = set(DlmLock.model_fields)
    ruled = {name.split(".")[0] for name in RULES}
    assert top_level == ruled | NOT_COMPARED, top_level ^ (ruled | NOT_COMPARED)


def test_torch_rule_compares_major_versions_only() -> None:
    assert judge("pinned_versions.torch", "2.4.1", "2.13.0").severity is WARN
    assert judge("pinned_versions.torch", "2.13.0", "10.0.0").severity is ERROR
    assert judge("pinned_versions.torch", "absent", "2.13.0").severity is ERROR

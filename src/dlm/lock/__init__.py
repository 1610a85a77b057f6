"""The determinism lock: record what a training run ran on, and refuse silent drift.

    dlm.lock.schema        the `dlm.lock` file format (pydantic), read_lock
    dlm.lock.environment   versions, hardware tier, CPU capability, threads
    dlm.lock.probe         the same facts without importing torch (for `dlm doctor`)
    dlm.lock.determinism   seeding, deterministic switches, strong/best-effort/advisory
    dlm.lock.policy        one rule per field: ALLOW / WARN / ERROR
    dlm.lock.validator     LockMode, check_lock -> LockDecision
    dlm.lock.record        LockInputs, build_lock, write_lock
    dlm.lock.adapter       canonical adapter folder, adapter_sha256

Typical use in `dlm train`:

    mode = LockMode.DEFAULT  # or STRICT, UPDATE, IGNORE (dlm train --strict-lock, ...)
    flags = apply_determinism(seed)
    current = build_lock(LockInputs(...), flags)
    decision = check_lock(store_dir, current, mode)     # before training; may raise
    ...train, save the adapter...
    canonicalize_adapter_dir(adapter_dir, base_model_name=...)
    if decision.should_write:
        write_lock(store_dir, current, run_id=run_id, adapter_sha256=adapter_sha256(adapter_dir))
"""

from dlm.lock.adapter import adapter_sha256, canonicalize_adapter_dir
from dlm.lock.determinism import apply_determinism, current_flags, determinism_class, planned_flags
from dlm.lock.environment import Environment, capture_environment, pinned_versions
from dlm.lock.policy import Severity, Verdict
from dlm.lock.record import LockInputs, build_lock, hyperparameters_sha256, write_lock
from dlm.lock.schema import LOCK_FILENAME, LOCK_VERSION, DeterminismFlags, DlmLock, lock_path, read_lock
from dlm.lock.validator import (
    LockDecision,
    LockMismatchError,
    LockMode,
    Mismatch,
    check_lock,
    check_lock_readable,
    diff_locks,
)

__all__ = [
    "LOCK_FILENAME",
    "LOCK_VERSION",
    "DeterminismFlags",
    "DlmLock",
    "Environment",
    "LockDecision",
    "LockInputs",
    "LockMismatchError",
    "LockMode",
    "Mismatch",
    "Severity",
    "Verdict",
    "adapter_sha256",
    "apply_determinism",
    "build_lock",
    "canonicalize_adapter_dir",
    "capture_environment",
    "check_lock",
    "check_lock_readable",
    "current_flags",
    "determinism_class",
    "diff_locks",
    "hyperparameters_sha256",
    "lock_path",
    "pinned_versions",
    "planned_flags",
    "read_lock",
    "write_lock",
]

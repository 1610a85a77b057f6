"""Compare this run with the store's `dlm.lock` and decide what happens.

`check_lock` returns a `LockDecision` (what to do, every drifted field, the warning
lines, whether to write the lock after training); the CLI prints the warnings and the
trainer honours `should_write`. It raises only when the run must stop:

    mode      lock absent        lock matches   WARN drift               ERROR drift
    default   write              write          warn, write              raise
    strict    write              write          raise                    raise
    update    write, no check    write          write                    write
    ignore    no check, no write (the lock on disk is left as it was)

A damaged, unknown-version or another document's lock raises in `default` and
`strict` mode; `update` replaces it and `ignore` never reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, NamedTuple

from dlm.errors import LockValidationError
from dlm.lock.policy import NOT_COMPARED, Severity, judge
from dlm.lock.schema import DlmLock, lock_path, lock_to_json, read_lock

UPDATE_HINT = "rerun with --update-lock to accept this run's values and rewrite the lock"


class LockMode(str, Enum):
    """How `dlm train` treats the lock (`--strict-lock`, `--update-lock`, `--ignore-lock`)."""

    DEFAULT = "default"
    STRICT = "strict"
    UPDATE = "update"
    IGNORE = "ignore"


class Mismatch(NamedTuple):
    """One drifted field: dotted `field`, locked `old`, this run's `new` (None = absent)."""

    field: str
    old: Any
    new: Any
    severity: Severity
    reason: str

    def line(self) -> str:
        """`field: old -> new (reason)`."""
        return f"{self.field}: {_show(self.old)} -> {_show(self.new)} ({self.reason})"


def _show(value: Any) -> str:
    return "absent" if value is None else str(value)


@dataclass(frozen=True)
class LockDecision:
    """What `check_lock` decided.

    Attributes:
        action: `create` (no lock yet), `match`, `drift` (ALLOW/WARN changes only),
            `update` (`--update-lock`) or `ignore` (`--ignore-lock`).
        mismatches: every drifted field, sorted by field name.
        warnings: one `dlm.lock: field: old -> new (reason)` line per WARN, for stderr.
        should_write: write the lock after a successful train.
    """

    action: str
    mismatches: tuple[Mismatch, ...] = ()
    warnings: tuple[str, ...] = ()
    should_write: bool = True
    lock_file: Path | None = field(default=None, compare=False)


class LockMismatchError(LockValidationError):
    """The lock disagrees with this run beyond what the mode allows; `mismatches` lists them."""

    def __init__(self, message: str, mismatches: tuple[Mismatch, ...]) -> None:
        super().__init__(message)
        self.mismatches = mismatches


def flatten(lock: DlmLock) -> dict[str, Any]:
    """The compared fields of `lock` as `{dotted.field: leaf value}`."""
    flat: dict[str, Any] = {}
    for key, value in lock_to_json(lock).items():
        if key in NOT_COMPARED:
            continue
        if isinstance(value, dict):
            for sub, leaf in value.items():
                flat[f"{key}.{sub}"] = leaf
        else:
            flat[key] = value
    return flat


def diff_locks(old: DlmLock, new: DlmLock) -> tuple[Mismatch, ...]:
    """Every compared field whose value differs, judged by `dlm.lock.policy`."""
    before, after = flatten(old), flatten(new)
    out = []
    for name in sorted(before.keys() | after.keys()):
        a, b = before.get(name), after.get(name)
        if a != b:
            verdict = judge(name, a, b)
            out.append(Mismatch(name, a, b, verdict.severity, verdict.reason))
    return tuple(out)


def check_lock_readable(store_dir: Path, mode: LockMode) -> None:
    """Read `store_dir/dlm.lock` when `mode` compares against it (`default`, `strict`),
    so that a damaged lock stops a run before a model or a rank is started; the full
    check (`check_lock`) still runs once the run's lock is built.

    Raises:
        LockValidationError: the lock is damaged or of an unknown version.
    """
    path = lock_path(store_dir)
    if mode not in (LockMode.IGNORE, LockMode.UPDATE) and path.is_file():
        read_lock(path)


def check_lock(store_dir: Path, current: DlmLock, mode: LockMode) -> LockDecision:
    """Validate `current` (from `build_lock`) against `store_dir/dlm.lock`, before training.

    Raises:
        LockValidationError: the lock is damaged, of an unknown version, or belongs to
            another document (`default`/`strict` only).
        LockMismatchError: an ERROR drift, or (in `strict` mode) any WARN drift; the message
            lists each as `field: old -> new` and the way out (`--update-lock`).
    """
    path = lock_path(store_dir)
    if mode is LockMode.IGNORE:
        return LockDecision("ignore", should_write=False, lock_file=path)
    if mode is LockMode.UPDATE:
        return LockDecision("update", should_write=True, lock_file=path)
    if not path.is_file():
        return LockDecision("create", should_write=True, lock_file=path)
    old = read_lock(path)
    if old.dlm_id != current.dlm_id:
        raise LockValidationError(
            f"{path}: dlm_id {old.dlm_id} -> {current.dlm_id}: this lock belongs to another document; {UPDATE_HINT}"
        )
    mismatches = diff_locks(old, current)
    _raise_on_blocking(path, mismatches, strict=mode is LockMode.STRICT)
    warnings = tuple(f"dlm.lock: {m.line()}" for m in mismatches if m.severity is Severity.WARN)
    return LockDecision(
        "drift" if mismatches else "match",
        mismatches=mismatches,
        warnings=warnings,
        should_write=True,
        lock_file=path,
    )


def _raise_on_blocking(path: Path, mismatches: tuple[Mismatch, ...], *, strict: bool) -> None:
    blocking = {Severity.ERROR, Severity.WARN} if strict else {Severity.ERROR}
    bad = tuple(m for m in mismatches if m.severity in blocking)
    if not bad:
        return
    why = " (--strict-lock treats every warning as an error)" if strict else ""
    lines = "\n".join(f"  {m.line()}" for m in bad)
    raise LockMismatchError(
        f"{path}: this run differs from the lock{why}:\n{lines}\n{UPDATE_HINT} (or --ignore-lock for a one-off run)",
        bad,
    )

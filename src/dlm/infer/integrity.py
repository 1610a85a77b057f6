"""Is an adapter version the one training wrote?

Training records each published version's `adapter_sha256` (`dlm.lock.adapter`: a hash
over every file of the folder) in the store's manifest entry for that version, and in
`dlm.lock` for the version its last run made. `verify_adapter` hashes the folder and
compares it with every hash recorded for the version; a store that records none (made
before hashes were recorded) passes, reported as checked against `none`.

A mismatch means the files were damaged or edited after training, so what would run
is not what was trained and evaluated. Every command that uses an adapter refuses it
in one line, the same way: `dlm export` (an export would carry it elsewhere under the
trained version's name), `dlm prompt` and `dlm serve` at start (their answers would be
wrong without a sign), and a `dlm serve` reload (the document keeps serving its last
good version; `dlm.serve.reload`). Each names its own way out; `--no-adapter` answers
with the base model alone. Hashing reads the adapter once (a few MB for a LoRA of a
small model) before the model loads.
"""

from __future__ import annotations

from pathlib import Path

from dlm.errors import DlmError
from dlm.store import Store


def recorded_hashes(store: Store, version: str) -> list[tuple[str, str]]:
    """The `adapter_sha256` values the store records for `version`, as (where, hash):
    the manifest's entry for it, and the lock's when its last run produced `version`.

    Raises:
        StoreError: the manifest is damaged. LockValidationError: the lock is.
    """
    from dlm.lock import read_lock

    found: list[tuple[str, str]] = []
    entries = [e for e in store.read_manifest().get("adapters") or [] if e.get("version") == version]
    run_ids = {e.get("run_id") for e in entries}
    found += [(str(store.manifest_path), str(e["adapter_sha256"])) for e in entries[-1:] if e.get("adapter_sha256")]
    if store.lock_path.is_file():
        lock = read_lock(store.lock_path)
        if lock.adapter_sha256 and lock.last_run_id in run_ids:
            found.append((str(store.lock_path), lock.adapter_sha256))
    return found


def verify_adapter(
    store: Store, version: str, adapter_dir: Path, *, way_out: str, error: type[DlmError]
) -> tuple[str, str]:
    """Hash `adapter_dir` and compare it with what training recorded for `version`.

    Args:
        way_out: the end of the refusal line, what the user can do (`retrain with ...`).
        error: the `DlmError` class to raise (the caller's: `ExportRefused`, `StoreError`).

    Returns:
        (`sha256:<hex>` of the folder, what it was checked against: `manifest`,
        `manifest+lock`, or `none` for a store that recorded no hash).

    Raises:
        error: the folder differs from a recorded hash, or it cannot be read (one line).
        StoreError, LockValidationError: the manifest or lock is damaged.
    """
    from dlm.lock import adapter_sha256

    try:
        actual = adapter_sha256(adapter_dir)
    except OSError as exc:
        raise error(f"{adapter_dir}: cannot read the adapter ({exc.strerror or exc}); {way_out}") from None
    recorded = recorded_hashes(store, version)
    for where, expected in recorded:
        if expected != actual:
            raise error(
                f"{adapter_dir}: the adapter's files hash to {actual}, but {where} records {expected} for "
                f"{version}: they were damaged or edited after training; {way_out}"
            )
    names = {"manifest.json": "manifest", "dlm.lock": "lock"}
    return actual, "+".join(names[Path(w).name] for w, _ in recorded) or "none"

"""Checkpoints of a run in progress, so that Ctrl-C loses at most `checkpoint_every`.

    <store>/adapter/.staging-<run_id>/checkpoints/
        run.json           canonical JSON: {"run_id", "lock"}: the run's determinism lock
                           as built before training (`dlm.lock.DlmLock`), what `--resume`
                           compares against
        latest             text: the name of the newest complete checkpoint, "step-000040"
        step-000040/       the adapter (adapter_model.safetensors, adapter_config.json),
                           optimizer.pt (AdamW's state_dict), scheduler.pt, state.json
                           (`LoopState`: step, tokens, the summed loss, the probe
                           tracker's scores), best.safetensors when a best adapter is kept

Nothing random needs saving: the order of the examples and the dropout masks are
functions of the seed and the step (`dlm.train.data`, `dlm.train.dropout`).

Why a checkpoint is never half-written: `save_checkpoint` writes into a scratch folder
beside `checkpoints/`; only when it is complete are its files fsynced and the folder
renamed into `checkpoints/` (atomic on one filesystem), and only then is `latest`
replaced through `dlm.atomic`. A crash or Ctrl-C at any moment leaves `latest` naming a
complete checkpoint or none. Older checkpoints are removed after `latest` moves on, so
one is kept.

The trigger (`CheckpointClock`): every `steps` optimizer steps, or the first step
ending `seconds` or more after the last checkpoint (or the start); never at the last
step, whose adapter is published instead.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dlm.atomic import atomic_write_json, atomic_write_text, fsync_dir
from dlm.doc.budget import Every
from dlm.errors import TrainingError

LATEST = "latest"
RUN_FILE = "run.json"
STATE_FILE = "state.json"
# the lock fields that say what a run is: a resumed run must match them all
RESUME_FIELDS = {
    "dlm_sha256": "the document",
    "corpus_fingerprint": "the training rows",
    "tokenizer_sha256": "the tokenizer",
    "hyperparameters_sha256": "the hyperparameters",
    "seed": "training.seed",
    "base_model.name": "the base model",
    "base_model.revision": "the base model",
    "precision": "the precision",
    "world_size": "the world size",
    "per_device_batch_size": "the micro-batch",
    "gradient_accumulation_steps": "the gradient accumulation",
}


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest complete checkpoint under `folder` (a `checkpoints/`), or None."""
    try:
        name = (folder / LATEST).read_text().strip()
    except FileNotFoundError:
        return None
    path = folder / name
    return path if name.startswith("step-") and path.is_dir() else None


def checkpoint_step(path: Path) -> int:
    """The optimizer step of a checkpoint folder (`step-000040` -> 40)."""
    return int(path.name.removeprefix("step-"))


def publish_checkpoint(written: Path, folder: Path, step: int) -> Path:
    """Move the complete checkpoint folder `written` to `folder/step-NNNNNN`,
    durably, point `latest` at it and remove older ones (module docstring)."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in written.rglob("*"):
        if path.is_file():
            with open(path, "rb") as fh:
                os.fsync(fh.fileno())
    dest = folder / f"step-{step:06d}"
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(written, dest)
    fsync_dir(folder)
    atomic_write_text(folder / LATEST, dest.name + "\n")
    for old in folder.glob("step-*"):
        if old != dest:
            shutil.rmtree(old, ignore_errors=True)
    return dest


def write_run_file(folder: Path, run_id: str, lock: dict[str, Any]) -> None:
    """Record what the run is (its lock as JSON) next to its checkpoints."""
    atomic_write_json(folder / RUN_FILE, {"run_id": run_id, "lock": lock})


def resume_refusal(folder: Path, run_id: str, current: Any) -> str | None:
    """Why run `run_id` cannot be resumed with this run's lock `current` (a
    `dlm.lock.DlmLock`), in one line, or None when every field of `RESUME_FIELDS` is
    unchanged. The comparison is the lock's own (`dlm.lock.diff_locks`), restricted to
    the fields that define the run; the environment (library versions, threads) may
    differ, as the lock allows."""
    from dlm.lock import DlmLock, diff_locks

    try:
        saved = DlmLock.model_validate(json.loads((folder / RUN_FILE).read_text())["lock"])
    except (OSError, ValueError, KeyError) as exc:
        return f"cannot resume run {run_id}: {folder / RUN_FILE} is unreadable ({exc})"
    changed = [m for m in diff_locks(saved, current) if m.field in RESUME_FIELDS]
    if not changed:
        return None
    what = sorted({RESUME_FIELDS[m.field] for m in changed})
    said = what[0] if len(what) == 1 else f"{', '.join(what[:-1])} and {what[-1]}"
    return (
        f"cannot resume run {run_id}: {said} changed since it was interrupted "
        f"({', '.join(m.field for m in changed)}); run `dlm train` without --resume to start afresh"
    )


def find_resumable(staging_dirs: list[Path]) -> tuple[str, Path]:
    """(run id, latest checkpoint) of the interrupted run among the store's staging folders.

    Raises:
        TrainingError: no staging folder holds a complete checkpoint.
    """
    for staging in reversed(staging_dirs):
        found = latest_checkpoint(staging / "checkpoints")
        if found is not None:
            return staging.name.removeprefix(".staging-"), found
    raise TrainingError(
        "nothing to resume: no interrupted run with a checkpoint in this document's store; "
        "run `dlm train` without --resume"
    )


class CheckpointClock:
    """When a checkpoint is due (module docstring): `every.steps` steps, or `every.seconds`
    after the last one; never at `max_steps`."""

    def __init__(self, every: Every, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock, self.last = every, clock, clock()

    def due(self, step: int, max_steps: int) -> bool:
        if step >= max_steps:
            return False
        if self.every.steps is not None:
            return step % self.every.steps == 0
        return self.clock() - self.last >= (self.every.seconds or 0)

    def saved(self) -> None:
        self.last = self.clock()


def save_checkpoint(folder: Path, step: int, parts: dict[str, Callable[[Path], None]]) -> Path:
    """Write a checkpoint of `step` under `folder` (a `checkpoints/`) and publish it.

    Args:
        parts: file or folder writers, each called with the scratch checkpoint folder
            (the adapter, the optimizer, the loop's state).

    Returns:
        The published `folder/step-NNNNNN`.
    """
    scratch = folder.parent / f".checkpoint-{step:06d}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    for write in parts.values():
        write(scratch)
    return publish_checkpoint(scratch, folder, step)


def read_state(checkpoint: Path) -> dict[str, Any]:
    """The loop's `state.json` of a checkpoint folder.

    Raises:
        TrainingError: it is missing or unreadable (a checkpoint of another dlm version).
    """
    try:
        return dict(json.loads((checkpoint / STATE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise TrainingError(
            f"cannot resume from {checkpoint}: its {STATE_FILE} is unreadable ({exc}); "
            "run `dlm train` without --resume to start afresh"
        ) from None

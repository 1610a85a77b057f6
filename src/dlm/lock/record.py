"""Build a `DlmLock` for this run and write it after training.

`build_lock` captures the environment (`dlm.lock.environment`) and the determinism
switches (`dlm.lock.determinism`) around what the trainer knows (`LockInputs`); its
`last_run_id` and `adapter_sha256` stay empty until `write_lock` fills them in.

The hyperparameters are hashed, not stored: `sha256:` over their canonical JSON
(sorted keys, no whitespace, `HYPERPARAMETERS_FORMAT` prefixed), so key order in the
trainer's dict never changes the hash.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path, PurePath
from typing import Any

from dlm.atomic import atomic_write_json
from dlm.canonical import canonical_sha256
from dlm.lock.determinism import determinism_class
from dlm.lock.environment import Environment, capture_environment
from dlm.lock.schema import (
    LOCK_VERSION,
    BackendName,
    BaseModelPin,
    DeterminismFlags,
    DlmLock,
    HardwareTier,
    lock_path,
    lock_to_json,
)

HYPERPARAMETERS_FORMAT = "dlm-hparams-v1"


@dataclass(frozen=True)
class LockInputs:
    """What the trainer knows about the run that the lock records.

    Attributes:
        dlm_id: the document's ULID.
        dlm_sha256: `sha256:<hex>` of the document's bytes.
        base_model_name: `base_model` as written (`smollm2-135m`, a path, a hub id).
        base_model_revision: `BaseModelRef.revision` (`sha256:<hex>` or `hub:<commit>`).
        precision: training dtype name (`float32`, `bfloat16`, ...).
        seed: the seed passed to `apply_determinism`.
        tokenizer_sha256: `dlm.tokenize.fingerprint.tokenizer_sha256`.
        corpus_fingerprint: `dlm.tokenize.keys.corpus_fingerprint` over the run's row keys.
        hyperparameters: the training settings, JSON-serializable (Paths and Enums allowed).
        hardware_tier: the tier actually trained on, when the trainer forces one
            (e.g. `cpu` on a GPU machine); None detects it.
        world_size, per_device_batch_size, gradient_accumulation_steps, backend: the
            run's `dlm.train.distributed.DistPlan` (one process: 1, batch_size, its
            accumulation, "none").
    """

    dlm_id: str
    dlm_sha256: str
    base_model_name: str
    base_model_revision: str
    precision: str
    seed: int
    tokenizer_sha256: str
    corpus_fingerprint: str
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    hardware_tier: HardwareTier | None = None
    world_size: int = 1
    per_device_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    backend: BackendName = "none"


def hyperparameters_sha256(hyperparameters: dict[str, Any]) -> str:
    """`sha256:<hex>` over the canonical JSON of `hyperparameters` (module docstring).

    Raises:
        TypeError: a value is not JSON-serializable (not a str/number/bool/None/list/dict,
            Path or Enum).
    """
    return canonical_sha256({"format": HYPERPARAMETERS_FORMAT, "values": hyperparameters}, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, PurePath):
        return value.as_posix()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"hyperparameter value of type {type(value).__name__} is not JSON-serializable")


def build_lock(inputs: LockInputs, flags: DeterminismFlags, *, environment: Environment | None = None) -> DlmLock:
    """The lock this run would write, before training (adapter fields empty).

    Args:
        inputs: what the trainer knows.
        flags: what `apply_determinism` returned.
        environment: a captured `Environment`; None captures the current machine.
    """
    env = environment or capture_environment()
    tier = inputs.hardware_tier or env.hardware_tier
    return DlmLock(
        lock_version=LOCK_VERSION,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        dlm_id=inputs.dlm_id,
        dlm_sha256=inputs.dlm_sha256,
        base_model=BaseModelPin(name=inputs.base_model_name, revision=inputs.base_model_revision),
        pinned_versions=dict(env.versions),
        cuda_version=env.cuda_version,
        rocm_version=env.rocm_version,
        hardware_tier=tier,
        cpu_capability=env.cpu_capability,
        torch_threads=env.torch_threads,
        precision=inputs.precision,
        seed=inputs.seed,
        determinism_flags=flags,
        determinism_class=determinism_class(tier, flags),
        tokenizer_sha256=inputs.tokenizer_sha256,
        corpus_fingerprint=inputs.corpus_fingerprint,
        hyperparameters_sha256=hyperparameters_sha256(inputs.hyperparameters),
        world_size=inputs.world_size,
        per_device_batch_size=inputs.per_device_batch_size,
        gradient_accumulation_steps=inputs.gradient_accumulation_steps,
        backend=inputs.backend,
    )


def write_lock(store_dir: Path, current: DlmLock, *, run_id: str, adapter_sha256: str) -> DlmLock:
    """Write `store_dir/dlm.lock` atomically with this run's id and adapter hash.

    `created_at` is the time of this write. Returns the lock as written.

    Raises:
        OSError: the store is not writable; the previous lock is left untouched.
    """
    final = current.model_copy(
        update={
            "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "last_run_id": run_id,
            "adapter_sha256": adapter_sha256,
        }
    )
    atomic_write_json(lock_path(store_dir), lock_to_json(final))
    return final

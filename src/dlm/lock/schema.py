"""The `dlm.lock` file: what one successful `dlm train` ran on, and what it produced.

Location: `$DLM_HOME/store/<dlm_id>/dlm.lock`, next to the store's `manifest.json`.
Written with `dlm.atomic.atomic_write_json` (canonical JSON: sorted keys, two-space
indent, trailing newline) after a successful train, so a reader sees the previous lock
or the new one, never a partial file. Layout (`lock_version` 2):

    {
      "lock_version": 2,
      "created_at": "2026-01-01T00:00:00+00:00",      # UTC, seconds
      "dlm_id": "01J...",                              # the document's ULID
      "dlm_sha256": "sha256:<hex>",                    # the document's bytes
      "base_model": {"name": "smollm2-135m", "revision": "sha256:<hex>" | "hub:<commit>"},
      "pinned_versions": {"torch": "2.13.0+cpu", "transformers": ..., "peft": ...,
                          "accelerate": ..., "tokenizers": ..., "numpy": ...,
                          "bitsandbytes": ...},          # bitsandbytes only when installed
      "cuda_version": "12.4" | null, "rocm_version": "6.1" | null,
      "hardware_tier": "cpu" | "cuda" | "mps" | "rocm",
      "cpu_capability": "AVX2",                        # torch.backends.cpu.get_cpu_capability()
      "torch_threads": 8,                              # torch.get_num_threads()
      "precision": "float32",
      "seed": 42,
      "determinism_flags": {...DeterminismFlags...},   # what was really set
      "determinism_class": "strong" | "best-effort" | "advisory",
      "tokenizer_sha256": "sha256:<hex>",
      "corpus_fingerprint": "sha256:<hex>",            # over the run's row keys, in order
      "hyperparameters_sha256": "sha256:<hex>",        # canonical JSON of the training config
      "world_size": 2,                                 # ranks (processes) that trained
      "per_device_batch_size": 2,                      # rows per micro-batch on each rank
      "gradient_accumulation_steps": 1,                # micro-batches each rank sums per step
      "backend": "none" | "gloo" | "nccl",             # collectives between ranks
      "last_run_id": "..." ,
      "adapter_sha256": "sha256:<hex>"                 # see dlm.lock.adapter
    }

A file that is not JSON, lacks a field, has a field of the wrong type or an unknown
field, or carries a `lock_version` this `dlm` does not read is rejected by `read_lock`
with a `LockValidationError` naming the field and the way out (`--update-lock`).
A new field bumps `LOCK_VERSION` and gets a rule in `dlm.lock.policy`.

Version 1 (no distributed fields) is still read: it was always one process, so
`world_size` 1 and `backend` "none"; its micro-batch and accumulation were not
recorded and read as null (the policy allows that change). The next write is version 2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from dlm.errors import LockValidationError

LOCK_VERSION: Literal[2] = 2
READABLE_VERSIONS = (1, 2)
LOCK_FILENAME = "dlm.lock"
WAY_OUT = "rerun with --update-lock to rewrite it (or --ignore-lock to train without it)"

HardwareTier = Literal["cpu", "cuda", "mps", "rocm"]
DeterminismClass = Literal["strong", "best-effort", "advisory"]
BackendName = Literal["none", "gloo", "nccl"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


class DeterminismFlags(_Frozen):
    """The determinism switches as read back from torch and the environment.

    Attributes:
        use_deterministic_algorithms: `torch.are_deterministic_algorithms_enabled()`.
        deterministic_warn_only: `torch.is_deterministic_algorithms_warn_only_enabled()`;
            True means an op without a deterministic kernel only warns.
        cudnn_deterministic: `torch.backends.cudnn.deterministic`.
        cudnn_benchmark: `torch.backends.cudnn.benchmark` (autotuning picks kernels by speed).
        cublas_workspace_config: `$CUBLAS_WORKSPACE_CONFIG`, needed for deterministic cuBLAS.
        full_determinism: every switch above is in its deterministic position.
    """

    use_deterministic_algorithms: bool
    deterministic_warn_only: bool
    cudnn_deterministic: bool
    cudnn_benchmark: bool
    cublas_workspace_config: str | None
    full_determinism: bool


class BaseModelPin(_Frozen):
    """The base model by name and identity (`sha256:<hex>` of weights or `hub:<commit>`)."""

    name: str
    revision: str


class DlmLock(_Frozen):
    """One `dlm.lock` (see the module docstring for the meaning of each field)."""

    lock_version: Literal[2]
    created_at: str
    dlm_id: str = Field(min_length=1)
    dlm_sha256: str
    base_model: BaseModelPin
    pinned_versions: dict[str, str]
    cuda_version: str | None
    rocm_version: str | None
    hardware_tier: HardwareTier
    cpu_capability: str
    torch_threads: int = Field(ge=1)
    precision: str
    seed: int
    determinism_flags: DeterminismFlags
    determinism_class: DeterminismClass
    tokenizer_sha256: str
    corpus_fingerprint: str
    hyperparameters_sha256: str
    world_size: int = Field(ge=1)
    per_device_batch_size: int | None = Field(ge=1)
    gradient_accumulation_steps: int | None = Field(ge=1)
    backend: BackendName
    last_run_id: str | None = None
    adapter_sha256: str | None = None


def lock_path(store_dir: Path) -> Path:
    """`store_dir/dlm.lock`."""
    return Path(store_dir) / LOCK_FILENAME


def read_lock(path: Path) -> DlmLock:
    """Parse and validate a `dlm.lock`.

    Raises:
        LockValidationError: not UTF-8 JSON (e.g. truncated), not an object, an unknown
            `lock_version`, or fields that fail the schema — every bad field is named,
            with the way out (`--update-lock`).
        FileNotFoundError: `path` does not exist (the caller decides what that means).
    """
    raw = Path(path).read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise LockValidationError(f"{path}: not UTF-8 (byte {exc.start}); {WAY_OUT}") from None
    except json.JSONDecodeError as exc:
        raise LockValidationError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}; damaged or truncated); {WAY_OUT}"
        ) from None
    if not isinstance(data, dict):
        raise LockValidationError(f"{path}: expected a JSON object, got {type(data).__name__}; {WAY_OUT}")
    version = data.get("lock_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise LockValidationError(
            f"{path}: lock_version {version!r} is not supported (this dlm reads "
            f"{' and '.join(map(str, READABLE_VERSIONS))}); {WAY_OUT}"
        )
    if version == 1:
        data = upgrade_v1(data)
    try:
        return DlmLock.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe(err) for err in exc.errors())
        raise LockValidationError(f"{path}: {problems}; {WAY_OUT}") from None


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A version-1 lock as version 2: one process, no collectives, batch shape unrecorded."""
    return {
        **data,
        "lock_version": 2,
        "world_size": 1,
        "per_device_batch_size": None,
        "gradient_accumulation_steps": None,
        "backend": "none",
    }


def _describe(err: Mapping[str, Any]) -> str:
    field = ".".join(str(part) for part in err["loc"]) or "<root>"
    if err["type"] == "missing":
        return f"{field}: missing"
    if err["type"] == "extra_forbidden":
        return f"{field}: unknown field"
    return f"{field}: {err['msg']} (got {err.get('input')!r})"


def lock_to_json(lock: DlmLock) -> dict:
    """The lock as a JSON-ready dict (what `write_lock` hands to `atomic_write_json`)."""
    return lock.model_dump(mode="json")

"""Locks built from a fixed environment, so lock tests do not depend on this machine.

Imported by the tests in this folder (`from lock_factory import ...`).
"""

from __future__ import annotations

from typing import Any

from dlm.lock import DlmLock, Environment, LockInputs, build_lock, planned_flags

DLM_ID = "01M82E20JJ2XKSFH4S4XVQ8Q5N"

FIXED_ENV = Environment(
    hardware_tier="cpu",
    cuda_version=None,
    rocm_version=None,
    cpu_capability="AVX2",
    torch_threads=4,
    system="Linux",
    machine="x86_64",
    accelerator=None,
    versions={
        "torch": "2.13.0+cpu",
        "transformers": "5.23.0",
        "peft": "0.21.2",
        "accelerate": "1.15.0",
        "tokenizers": "0.23.3",
        "numpy": "2.4.6",
    },
)


def make_inputs(**overrides: Any) -> LockInputs:
    values: dict[str, Any] = dict(
        dlm_id=DLM_ID,
        dlm_sha256="sha256:" + "a" * 64,
        base_model_name="smollm2-135m",
        base_model_revision="sha256:" + "b" * 64,
        precision="float32",
        seed=42,
        tokenizer_sha256="sha256:" + "c" * 64,
        corpus_fingerprint="sha256:" + "d" * 64,
        hyperparameters={"lora_r": 4, "learning_rate": 0.001, "max_steps": 4},
    )
    values.update(overrides)
    return LockInputs(**values)


def make_lock(**overrides: Any) -> DlmLock:
    """A lock from FIXED_ENV; `overrides` are LockInputs fields."""
    return build_lock(make_inputs(**overrides), planned_flags(), environment=FIXED_ENV)


def edited(lock: DlmLock, dotted: str, value: Any) -> DlmLock:
    """`lock` with one dotted field set to `value` (None deletes a mapping key)."""
    data = lock.model_dump(mode="json")
    *parents, leaf = dotted.split(".")
    target = data
    for part in parents:
        target = target[part]
    if value is None and parents:
        target.pop(leaf, None)
    else:
        target[leaf] = value
    return DlmLock.model_validate(data)

"""Checkpoint publication is atomic, intervals parse, and `--resume` compares what the lock compares."""

import json
from pathlib import Path

import pytest

from dlm.doc.budget import Every, parse_every
from dlm.errors import TrainingError
from dlm.train.checkpoint import (
    find_resumable,
    latest_checkpoint,
    publish_checkpoint,
    resume_refusal,
    write_run_file,
)


def test_intervals_are_steps_or_time():
    assert parse_every(200) == Every(steps=200)
    assert parse_every("2m") == Every(seconds=120.0) and parse_every("90s") == Every(seconds=90.0)
    for bad in ("60k", "200", 0, "soon"):
        with pytest.raises(ValueError, match="checkpoint interval|positive"):
            parse_every(bad)


def trainer_checkpoint(root: Path, step: int) -> Path:
    folder = root / "trainer" / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "optimizer.pt").write_bytes(b"o" * step)
    return folder


def test_latest_names_only_a_complete_checkpoint_and_one_is_kept(tmp_path: Path):
    folder = tmp_path / "checkpoints"
    assert latest_checkpoint(folder) is None
    publish_checkpoint(trainer_checkpoint(tmp_path, 2), folder, 2)
    half = trainer_checkpoint(tmp_path, 4)  # the Trainer is still writing this one
    assert latest_checkpoint(folder) == folder / "step-000002"
    publish_checkpoint(half, folder, 4)
    assert latest_checkpoint(folder) == folder / "step-000004"
    assert sorted(p.name for p in folder.iterdir()) == ["latest", "step-000004"]
    assert (folder / "step-000004" / "optimizer.pt").read_bytes() == b"oooo"


def test_find_resumable_names_the_run_or_says_there_is_none(tmp_path: Path):
    with pytest.raises(TrainingError, match="^nothing to resume"):
        find_resumable([tmp_path / ".staging-R1"])
    staging = tmp_path / ".staging-R1"
    publish_checkpoint(trainer_checkpoint(staging, 3), staging / "checkpoints", 3)
    assert find_resumable([staging]) == ("R1", staging / "checkpoints" / "step-000003")


def lock(**changes):
    from dlm.lock import DlmLock

    base = {
        "lock_version": 2,
        "created_at": "t",
        "dlm_id": "D",
        "dlm_sha256": "a" * 64,
        "base_model": {"name": "smollm2-135m", "revision": "r"},
        "pinned_versions": {"torch": "2.13.0"},
        "cuda_version": None,
        "rocm_version": None,
        "hardware_tier": "cpu",
        "cpu_capability": "AVX2",
        "torch_threads": 2,
        "precision": "float32",
        "seed": 42,
        "determinism_flags": {
            "use_deterministic_algorithms": True,
            "deterministic_warn_only": False,
            "cudnn_deterministic": True,
            "cudnn_benchmark": False,
            "cublas_workspace_config": None,
            "full_determinism": True,
        },
        "determinism_class": "strong",
        "tokenizer_sha256": "t" * 64,
        "corpus_fingerprint": "c" * 64,
        "hyperparameters_sha256": "h" * 64,
        "world_size": 1,
        "per_device_batch_size": 4,
        "gradient_accumulation_steps": 1,
        "backend": "none",
    }
    return DlmLock.model_validate({**base, **changes})


def test_resume_refuses_a_changed_run_and_allows_a_changed_environment(tmp_path: Path):
    saved = lock()
    write_run_file(tmp_path, "R1", json.loads(saved.model_dump_json()))
    assert resume_refusal(tmp_path, "R1", lock(torch_threads=8, created_at="later")) is None
    assert resume_refusal(tmp_path, "R1", lock(hyperparameters_sha256="x" * 64, dlm_sha256="y" * 64)) == (
        "cannot resume run R1: the document and the hyperparameters changed since it was interrupted "
        "(dlm_sha256, hyperparameters_sha256); run `dlm train` without --resume to start afresh"
    )
    assert "the training rows" in resume_refusal(tmp_path, "R1", lock(corpus_fingerprint="z" * 64))

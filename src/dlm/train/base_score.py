"""The base model's held-out score, remembered across runs of one document.

Every run scores its held-out examples on the base model before the first step (the
`before` measurement, `dlm.train.evaluate`). That number is a function of the model's
weights and config, the examples, and the software and hardware that compute it, and
nothing else: training a document again with the same held-out rows (the usual warm
`dlm train`) would compute the very same float again. On a CPU that is a forward pass
over every held-out row, more than all the rest of a warm run before its first step
(docs/benchmarks.md, "Base model's held-out score").
So the result is kept under a key that names every one of those inputs, and a run whose
key matches reads it instead of computing it; any other run computes and replaces it.

File (`Store.heldout_base_path`, canonical JSON, written atomically):

    {"format": 2,
     "key": "sha256:<hex>",                   # score_key(...) below
     "result": {"loss": ..., "perplexity": ..., "rows": ..., "tokens": ...,
                "loss_tokens": ..., "by_kind": {...}}}   # an EvalResult

One entry: the held-out rows change only when the document's rows or split change, and
the next run scores anew. A file that is missing, unreadable, of another format or of
another key is a miss, never an error. Floats survive JSON exactly (shortest repr), so a
remembered score is the computed one, bit for bit.

Key (`score_key`): `canonical_sha256` of
    format               FORMAT below (bumped when scoring changes meaning)
    model                revision (weights sha256 or hub commit), config.json sha256, dtype
    eval_set             `eval_set_sha256`: each example's kind, ids and labels in order,
                         the pad id, the batching rule (`TOKENS_PER_BATCH`)
    environment          what decides the floating-point result: pinned package versions,
                         hardware tier, accelerator, CUDA/ROCm versions, the CPU kernel
                         level, the CPU model, torch's thread count, the determinism flags,
                         the device the score runs on (`training_device`: a GPU machine
                         scored on its CPU before scoring followed training onto the GPU)
    precision            the dtype name the score is taken in, when not float32
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dlm.canonical import canonical_sha256
from dlm.keyed import read_keyed, write_keyed
from dlm.train.evaluate import TOKENS_PER_BATCH, WIDTH_MULTIPLE, EvalResult, EvalSet

# 2: the LM head fused into the NLL (dlm.train.lm_loss), other last bits; 3: scored in
# `SCORING_CHUNK_TOKENS` rows (other last bits on some CPUs)
FORMAT = 3
_CPUINFO = "/proc/cpuinfo"


def eval_set_sha256(eval_set: EvalSet, pad_id: int) -> str:
    """`sha256:<hex>` over every example (kind, ids, labels as little-endian int64, in
    order), the pad id and the batching rule (`TOKENS_PER_BATCH`, `WIDTH_MULTIPLE`): what
    `heldout_loss` reads besides the model."""
    digest = hashlib.sha256(f"dlm-eval-set\0{pad_id}\0{TOKENS_PER_BATCH}\0{WIDTH_MULTIPLE}\0".encode())
    for ex in eval_set.examples:
        ids, labels = ex.input_ids.astype("<i8"), ex.labels.astype("<i8")
        digest.update(f"{ex.kind}\0{ids.shape[0]}\0".encode())
        digest.update(ids.tobytes())
        digest.update(labels.tobytes())
    return "sha256:" + digest.hexdigest()


def model_identity(revision: str, folder: Path, dtype: str) -> dict[str, str]:
    """The model part of the key: `revision` (`BaseModelRef.revision`), the sha256 of
    `folder/config.json` (a config edit changes the model without touching its weights)
    and the dtype it is loaded in (`float32`).

    Raises:
        OSError: `folder/config.json` cannot be read.
    """
    config = hashlib.sha256((folder / "config.json").read_bytes()).hexdigest()
    return {"revision": revision, "config_sha256": f"sha256:{config}", "dtype": dtype}


def scoring_environment() -> dict[str, Any]:
    """The environment part of the key (module docstring); imports torch."""
    from dlm.lock import capture_environment, current_flags
    from dlm.train.precision import training_device

    env = asdict(capture_environment())
    env["cpu_model"] = cpu_model()
    env["scoring_device"] = training_device()
    env["determinism_flags"] = current_flags().model_dump()
    return env


def cpu_model(path: str = _CPUINFO) -> str:
    """The first `model name` of `/proc/cpuinfo` (two CPUs with one kernel level may
    still run different BLAS code paths), else `platform.processor()`."""
    import platform

    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "model name":
                    return value.strip()
    except OSError:
        pass
    return platform.processor()


def score_key(model: dict[str, str], eval_digest: str, environment: dict[str, Any], precision: str = "float32") -> str:
    """`sha256:<hex>` naming every input of one base-model score (module docstring);
    `precision` is the dtype name the score is taken in (`dlm.train.evaluate.scoring_precision`)."""
    key = {"format": FORMAT, "model": model, "eval_set": eval_digest, "environment": environment}
    if precision != "float32":  # float32 keys stay what they were before scores had a precision
        key["precision"] = precision
    return canonical_sha256(key)


@dataclass(frozen=True)
class BaseScoreMemo:
    """The remembered score at `path` for the run whose inputs hash to `key`."""

    path: Path
    key: str

    def read(self) -> EvalResult | None:
        """The remembered `EvalResult`, or None on any miss (module docstring)."""
        data = read_keyed(self.path, FORMAT, self.key)
        if data is None:
            return None
        try:
            result = data["result"]
            return EvalResult(
                loss=float(result["loss"]),
                perplexity=float(result["perplexity"]),
                rows=int(result["rows"]),
                tokens=int(result["tokens"]),
                loss_tokens=int(result["loss_tokens"]),
                by_kind={str(k): float(v) for k, v in result["by_kind"].items()},
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def write(self, result: EvalResult) -> None:
        """Replace the file with `result` under this key (atomic).

        Raises:
            OSError: the store folder cannot be written.
        """
        write_keyed(self.path, FORMAT, self.key, {"result": result.as_dict()})

"""How much each lock field may drift between the locked run and this one.

The policy is a table: one small pure rule per field, called only when the old and new
values differ, returning a `Verdict(severity, reason)`. Fields are dotted paths into the
lock (`base_model.revision`, `pinned_versions.torch`, `determinism_flags.cudnn_benchmark`);
a `prefix.*` entry covers every key under a mapping. A new lock field is one new entry
here and one new test.

    ALLOW  expected to change between runs (the document, its corpus, its settings);
           the change is reported, never blocks.
    WARN   the result may differ from the locked adapter; printed, training goes on
           (`--strict-lock` turns every WARN into an ERROR).
    ERROR  training on it would silently produce a different model; refused until the
           user accepts it with `--update-lock`.

Fields not compared: `lock_version`, `created_at`, `last_run_id`, `adapter_sha256`
(records of the last run) and `dlm_id` (a lock with another `dlm_id` belongs to another
document and is refused outright by the validator).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import Any, NamedTuple


class Severity(str, Enum):
    """How a field's drift is treated (module docstring)."""

    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"


class Verdict(NamedTuple):
    severity: Severity
    reason: str


Rule = Callable[[Any, Any], Verdict]

NOT_COMPARED = frozenset({"lock_version", "created_at", "last_run_id", "adapter_sha256", "dlm_id"})


def _allow(reason: str) -> Rule:
    return lambda old, new: Verdict(Severity.ALLOW, reason)


def _warn(reason: str) -> Rule:
    return lambda old, new: Verdict(Severity.WARN, reason)


def _error(reason: str) -> Rule:
    return lambda old, new: Verdict(Severity.ERROR, reason)


def _major(version: Any) -> str | None:
    if not isinstance(version, str):
        return None
    return version.split("+", 1)[0].split(".", 1)[0]


def torch_version_rule(old: Any, new: Any) -> Verdict:
    """A torch major change (or torch appearing/vanishing) is an ERROR: kernels, RNG and
    serialization can all change. Minor/patch/build changes are a WARN."""
    if _major(old) is None or _major(new) is None or _major(old) != _major(new):
        return Verdict(Severity.ERROR, "torch major version changed: kernels and RNG streams differ")
    return Verdict(Severity.WARN, "torch minor/patch version changed: kernels may differ")


def bitsandbytes_rule(old: Any, new: Any) -> Verdict:
    """Any bitsandbytes change is a WARN, including it being installed or removed."""
    if old is None:
        return Verdict(Severity.WARN, "bitsandbytes is now installed: quantized paths may differ")
    if new is None:
        return Verdict(Severity.WARN, "bitsandbytes is no longer installed: quantized paths may differ")
    return Verdict(Severity.WARN, "bitsandbytes version changed: quantized kernels may differ")


_LIBRARY_DRIFT = "library version changed: training code paths may differ"


def batch_shape_rule(what: str) -> Rule:
    """A micro-batch or accumulation change comes from the document (ALLOW), but it
    changes the adapter bytes: rows are padded and summed in another shape. A value
    missing from a version-1 lock is ALLOW too (never recorded)."""

    def rule(old: Any, new: Any) -> Verdict:
        if old is None:
            return Verdict(Severity.ALLOW, f"{what} was not recorded by lock version 1")
        return Verdict(Severity.ALLOW, f"{what} changed: gradients are summed in another shape")

    return rule


RULES: dict[str, Rule] = {
    "dlm_sha256": _allow("the document was edited"),
    "corpus_fingerprint": _allow("the training rows changed"),
    "hyperparameters_sha256": _allow("the training settings changed"),
    "seed": _allow("the document's seed changed"),
    "base_model.name": _allow("the base model is named differently (its weights are compared by revision)"),
    "base_model.revision": _error("different base model weights: the adapter would not fit the locked model"),
    "tokenizer_sha256": _warn("the tokenizer or tokenization pipeline changed: token ids differ"),
    "pinned_versions.torch": torch_version_rule,
    "pinned_versions.transformers": _warn(_LIBRARY_DRIFT),
    "pinned_versions.peft": _warn(_LIBRARY_DRIFT),
    "pinned_versions.accelerate": _warn(_LIBRARY_DRIFT),
    "pinned_versions.tokenizers": _warn(_LIBRARY_DRIFT),
    "pinned_versions.numpy": _warn(_LIBRARY_DRIFT),
    "pinned_versions.bitsandbytes": bitsandbytes_rule,
    "pinned_versions.*": _warn(_LIBRARY_DRIFT),
    "cuda_version": _warn("CUDA toolkit changed: GPU kernels may differ"),
    "rocm_version": _warn("ROCm version changed: GPU kernels may differ"),
    "hardware_tier": _warn("trained on different hardware: floating-point results differ"),
    "cpu_capability": _warn("CPU instruction set changed: vectorized kernels round differently"),
    "torch_threads": _warn("thread count changed: parallel reductions may sum in another order"),
    "precision": _warn("training precision changed: results differ"),
    "determinism_class": _warn("the determinism promise changed"),
    "determinism_flags.*": _warn("a determinism switch changed: kernels may be nondeterministic"),
    "world_size": _warn(
        "the number of ranks changed: identical bytes need the same micro-batches per "
        "step (world_size x gradient_accumulation_steps) and a power-of-two world size"
    ),
    "per_device_batch_size": batch_shape_rule("per-device micro-batch"),
    "gradient_accumulation_steps": batch_shape_rule("gradient accumulation"),
    "backend": _warn("the collective backend changed: gradients are averaged by other kernels"),
}


def rule_for(field: str) -> Rule:
    """The rule of a dotted field: exact entry, else its `prefix.*` entry.

    Raises:
        KeyError: no rule covers `field` (a field added to the schema without a rule).
    """
    if field in RULES:
        return RULES[field]
    return RULES[field.split(".", 1)[0] + ".*"]


def judge(field: str, old: Any, new: Any) -> Verdict:
    """Verdict for one changed field (`old != new`; None means absent)."""
    return rule_for(field)(old, new)

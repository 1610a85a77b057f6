"""The base model's side of an evaluation, remembered across evaluations of one document.

Every evaluation (`dlm eval`, and the report `dlm train` ends with) scores the items and
the general set on three models: the base, the adapter and the null adapter
(`dlm.judge.report`). The base model's side, each item's reference log-probability and
the general set's NLL, does not depend on the adapter: it is a function of the base
model, the items, the general set, the scoring settings and the software and hardware
that compute it. Every evaluation of a document whose items did not change would compute
the very same floats again; the general set alone is about 41 passages of up to 256
tokens, one of the two guard passes. So the side is kept under a key that names every
one of those inputs, and an evaluation whose key matches reads it and scores only the
adapter and the null adapter. The base model's greedy replies to the document's items
are not kept: the three models answer in one batch (`dlm.judge.score.greedy_rows`),
which costs about what two would, and a batch without the base rows would have another
shape and could round the adapter's replies differently. Its replies to the general
probes (`dlm.judge.forgetting`) are kept: the base answers them in batches of their own,
apart from the rows whose replies the report shows for the adapter, so reading them
changes no other row's batch.

File (`Store.judge_base_path`, canonical JSON, written atomically):

    {"format": 6,
     "key": "sha256:<hex>",                                 # BaseSideMemo.key(...)
     "items": [{"logprob": -1.234...}, ...],                # one per item, in order
     "general": {"nll": 2.81..., "passages": 41, "tokens": 9876} | null,
     "probes": ["The capital of France is Paris.", ...] | null}  # general probes, in order

`general` is null when the evaluation has no general set, and also when the memo has a
shared file (`general_path`, below): the base model's general-set score is then kept
there only, never copied into a document's memo, so a repaired or recomputed shared
entry is what every document reads next. `probes` is null when the evaluation asks no
general probes.

Log-probabilities and the NLL are the unrounded floats (JSON keeps a float exactly,
shortest repr), so a report built from the memo is byte-identical to one computed afresh.
One entry per document: the last key scored replaces it. A file that is missing,
unreadable, of another format, of another key or of another item count is a miss, never
an error.

Key (`BaseSideMemo.key`): `canonical_sha256` of
    format        FORMAT below (bumped when scoring changes meaning)
    model         `dlm.train.base_score.model_identity` (revision, config.json sha256,
                  dtype) and the sha256 of generation_config.json (it can change the
                  tokens greedy decoding stops at)
    tokenizer     `dlm.tokenize.fingerprint.tokenizer_sha256` (replies are decoded with it)
    items         `eval_set_sha256` of the items' reference examples (prompt and answer
                  ids, labels on the answer; the prompt ids are what greedy decoding
                  starts from) with the pad id and the scoring batch rule
    generation    max_new_tokens, the generation batch bounds (rows, cache bytes), the generation pad id
    general       `eval_set_sha256` of the general set's examples (None: no general set)
                  and the precision it is scored in (`dlm.judge.guard`)
    probes        `GeneralProbeItems.key`: the sha256 of the general probe file and the
                  probes' prompt ids (None: no general probes), so editing the file
                  recomputes the base model's replies
    environment   `dlm.train.base_score.scoring_environment`: pinned versions, hardware,
                  CPU model and kernel level, torch's thread count, determinism flags

The general set on the base model (`BaseSideMemo.general_path`, beside the materialized
base models: `models_dir()/general-scores.json`) does not depend on the document either:
it is kept per `general_key` (the model, tokenizer, environment, the general examples and
their precision), so the first evaluation of every new document on a known base model
and machine skips that pass too. `{"format": 6, "entries": {key: {"nll", "passages",
"tokens", "check"}}, "order": [key, ...]}`, the newest `GENERAL_KEPT` keys, written under
a file lock. The file is shared by every document and easy to edit by hand, so each entry
carries `check`, `canonical_sha256` of its key and its three numbers (`entry_check`): an
entry whose numbers do not match it is a miss, scored afresh and rewritten.

Whole reports (`ReportMemo`, `Store.judge_reports_dir`): the adapter's and the null
adapter's sides are a function of the base side's inputs plus the adapter's files, the
null adapter's seed and the warning threshold. `dlm train` ends by scoring its adapter;
a `dlm eval` of that adapter (a CI gate with `--min-pass`, say) would score the very
same floats again. So the report is kept under a key naming all of those (`report_key`),
one file per key, the newest `REPORTS_KEPT`; `dlm eval --recompute` skips it. The
report's `adapter_version` is not in the key (a retrain to the same bytes is the same
adapter) and is set on read.

    {"format": 6, "key": "sha256:<hex>", "report": {EvalReport.as_dict() ...}}

The key names what the models produced (replies, log-probabilities), not what a verdict
is made of: an item's keys, kind and origin and the pass rule can change without a token
the models see changing, so a remembered report is judged again on read
(`dlm.judge.report.rejudged`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.atomic import atomic_write_json
from dlm.canonical import canonical_sha256
from dlm.judge.guard import GuardScore
from dlm.keyed import read_keyed, write_keyed
from dlm.train.base_score import eval_set_sha256
from dlm.train.evaluate import EvalExample, EvalSet

# 2: the LM head fused into the NLL (dlm.train.lm_loss); 3: replies are not kept (one batch per
# model set); 4: scored in `SCORING_CHUNK_TOKENS` rows (other last bits on some CPUs),
# answered in batches of at most `GENERATE_BATCH` rows; 5: the general-set score kept only
# in the shared file, its entries checked; 6: the base model's replies to the general probes;
# 7: batches bounded in rows and key/value cache bytes (`GENERATE_CACHE_BYTES`)
FORMAT = 7
REPORTS_KEPT = 16  # report files kept per document; older ones are removed on write
GENERAL_KEPT = 32  # base models x machines x precisions whose general-set score is kept


@dataclass(frozen=True)
class BaseSide:
    """The base model's side of one evaluation.

    Attributes:
        logprobs: mean log-probability per reference-answer token per item (nats, <= 0),
            unrounded.
        general: the general set on the base model; None when there is no general set.
        probes: the base model's greedy replies to the general probes, in order; None
            when the evaluation asks none.
    """

    logprobs: list[float]
    general: GuardScore | None
    probes: list[str] | None = None


@dataclass(frozen=True)
class BaseSideMemo:
    """Where the base side of a document's evaluations is remembered, and the inputs of
    its key that depend on the model and the machine (module docstring); the inputs that
    depend on the items come with `key(...)`.

    Attributes:
        path: the memo file (`Store.judge_base_path`).
        model: `model_identity(...)` plus `generation_config_sha256` (`model_inputs`).
        tokenizer: `tokenizer_sha256(tokenizer)`.
        environment: `scoring_environment()`.
    """

    path: Path
    model: dict[str, Any]
    tokenizer: str
    environment: dict[str, Any]
    general_path: Path | None = None

    def general_key(self, general: list[EvalExample], *, pad_id: int, precision: str) -> str:
        """`sha256:<hex>` naming every input of the base model's general-set score: the
        model, tokenizer and environment of this memo, the examples and `precision`."""
        return canonical_sha256(
            {
                "format": FORMAT,
                "model": self.model,
                "tokenizer": self.tokenizer,
                "general": eval_set_sha256(EvalSet(general), pad_id),
                "general_precision": precision,
                "environment": self.environment,
            }
        )

    def _general_file(self) -> tuple[dict[str, Any], list[str]]:
        """`general_path`'s entries and their order, oldest first; empty when the file is
        missing or damaged (a miss, never an error)."""
        try:
            data = json.loads(self.general_path.read_text(encoding="utf-8")) if self.general_path else {}
            entries = dict(data["entries"])
            return entries, [str(k) for k in data["order"] if k in entries]
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}, []

    def read_general(self, key: str) -> GuardScore | None:
        """The base model's general-set score under `key` from `general_path`, or None on
        any miss: no such entry, or one whose numbers do not match its `check`."""
        entry = self._general_file()[0].get(key)
        if entry is None:
            return None
        try:
            score = GuardScore(float(entry["nll"]), int(entry["passages"]), int(entry["tokens"]))
            return score if entry["check"] == entry_check(key, score) else None
        except (ValueError, KeyError, TypeError):
            return None

    def write_general(self, key: str, score: GuardScore) -> None:
        """Add `score` under `key` to `general_path` (locked read-modify-write, atomic
        replace; the newest `GENERAL_KEPT` keys are kept). No-op without `general_path`.

        Raises:
            OSError: the folder cannot be written.
        """
        if self.general_path is None:
            return
        from filelock import FileLock

        self.general_path.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.general_path) + ".lock"):
            entries, order = self._general_file()
            # canonical JSON sorts the keys, so the order they were written in is a list beside them
            order = [*(k for k in order if k != key), key][-GENERAL_KEPT:]
            entries[key] = {
                "nll": score.nll,
                "passages": score.passages,
                "tokens": score.tokens,
                "check": entry_check(key, score),
            }
            atomic_write_json(
                self.general_path, {"format": FORMAT, "entries": {k: entries[k] for k in order}, "order": order}
            )

    def key(
        self,
        examples: list[EvalExample],
        general: list[EvalExample] | None,
        *,
        pad_id: int,
        generation_pad_id: int,
        max_new_tokens: int,
        generate_batch: int,
        generate_cache_bytes: int,
        general_precision: str = "float32",
        probes: str | None = None,
    ) -> str:
        """`sha256:<hex>` naming every input of the base side (module docstring).

        Args:
            examples: the items' reference examples (`dlm.judge.score.reference_examples`).
            general: the general set's examples (`dlm.judge.guard.guard_examples`), None
                or empty when the evaluation has none.
            pad_id: the pad id scoring batches with; `generation_pad_id`: generation's.
            general_precision: the dtype name the general set is scored in (`guard_score`).
            probes: `dlm.judge.forgetting.GeneralProbeItems.key`, None without general probes.
        """
        return canonical_sha256(
            {
                "format": FORMAT,
                "model": self.model,
                "tokenizer": self.tokenizer,
                "items": eval_set_sha256(EvalSet(examples), pad_id),
                "generation": {
                    "max_new_tokens": max_new_tokens,
                    "batch": generate_batch,
                    "cache_bytes": generate_cache_bytes,
                    "pad_id": generation_pad_id,
                },
                "general": eval_set_sha256(EvalSet(general), pad_id) if general else None,
                "general_precision": general_precision,
                "probes": probes,
                "environment": self.environment,
            }
        )

    def read(self, key: str, items: int, probes: int = 0) -> BaseSide | None:
        """The remembered side for `key` with `items` items and `probes` general-probe
        replies (0: none kept), or None on any miss."""
        data = read_keyed(self.path, FORMAT, key)
        if data is None:
            return None
        try:
            if len(data["items"]) != items:
                return None
            stored = data.get("probes")
            replies = [str(r) for r in stored] if isinstance(stored, list) else []
            if len(replies) != probes:
                return None
            general = data["general"]
            return BaseSide(
                [float(item["logprob"]) for item in data["items"]],
                None
                if general is None
                else GuardScore(float(general["nll"]), int(general["passages"]), int(general["tokens"])),
                replies if probes else None,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def write(self, key: str, side: BaseSide) -> None:
        """Replace the file with `side` under `key` (atomic).

        Raises:
            OSError: the store folder cannot be written.
        """
        general = side.general
        write_keyed(
            self.path,
            FORMAT,
            key,
            {
                "items": [{"logprob": logprob} for logprob in side.logprobs],
                "general": None
                if general is None
                else {"nll": general.nll, "passages": general.passages, "tokens": general.tokens},
                "probes": side.probes,
            },
        )


def entry_check(key: str, score: GuardScore) -> str:
    """`sha256:<hex>` of a shared general-score entry: its key and its three numbers
    (module docstring); a hand-edited or damaged entry does not match it."""
    return canonical_sha256({"key": key, "nll": score.nll, "passages": score.passages, "tokens": score.tokens})


def model_inputs(identity: dict[str, str], folder: Path) -> dict[str, Any]:
    """The model part of the key: `identity` (`dlm.train.base_score.model_identity`) and
    the sha256 of `folder/generation_config.json` (None when the folder has none)."""
    path = folder / "generation_config.json"
    generation = f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}" if path.is_file() else None
    return {**identity, "generation_config_sha256": generation}


def adapter_files_sha256(folder: Path) -> str:
    """`sha256:<hex>` over a peft adapter folder's `adapter_model.safetensors` and
    `adapter_config.json` (the weights and the scale and targets they are loaded with).

    Raises:
        OSError: either file cannot be read.
    """
    digest = hashlib.sha256()
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        data = (folder / name).read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode())
        digest.update(data)
    return f"sha256:{digest.hexdigest()}"


def report_key(
    base_key: str, adapter_sha256: str, *, seed: int, general_max_increase: float | None, general_samples: int = 0
) -> str:
    """`sha256:<hex>` naming every input of a whole report (module docstring):
    `base_key` (`BaseSideMemo.key`), the adapter's files (`adapter_files_sha256`), the
    null adapter's `seed` (which also seeds the general probes' drawn replies), the
    warning threshold (percent) and the drawn replies per flip of a general probe."""
    return canonical_sha256(
        {
            "format": FORMAT,
            "base": base_key,
            "adapter": adapter_sha256,
            "null_seed": seed,
            "general_max_increase": general_max_increase,
            "general_samples": general_samples,
        }
    )


@dataclass(frozen=True)
class ReportMemo:
    """Whole evaluation reports of one document, one JSON file per key in `folder`
    (`Store.judge_reports_dir`; module docstring)."""

    folder: Path

    def _path(self, key: str) -> Path:
        return self.folder / f"{key.removeprefix('sha256:')[:32]}.json"

    def read(self, key: str) -> dict[str, Any] | None:
        """The report dict (`EvalReport.as_dict()`) stored under `key`, or None on any miss."""
        data = read_keyed(self._path(key), FORMAT, key)
        report = data.get("report") if data is not None else None
        return dict(report) if isinstance(report, dict) else None

    def write(self, key: str, report: dict[str, Any]) -> None:
        """Store `report` under `key` (atomic), then keep only the newest `REPORTS_KEPT` files.

        Raises:
            OSError: the folder cannot be written.
        """
        path = self._path(key)
        self.folder.mkdir(parents=True, exist_ok=True)
        write_keyed(path, FORMAT, key, {"report": report})
        # file times are coarse (a few ms): the one just written is kept whatever its time
        others = sorted((p for p in self.folder.glob("*.json") if p != path), key=lambda p: p.stat().st_mtime_ns)
        for old in others[: max(0, len(others) - (REPORTS_KEPT - 1))]:
            old.unlink(missing_ok=True)

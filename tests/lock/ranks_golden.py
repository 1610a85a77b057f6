"""The two-rank golden: `dlm train --nproc 2` on CPU (gloo) of a fixed tiny document.

Repository tooling beside `golden_tool` (same tuple, same fresh-process runs):
`tests/lock/test_ranks_golden.py` and `scripts/regen-ranks-golden.py` import it.

    tests/golden/determinism/ranks2.dlm            the document: golden.dlm's corpus and
                                                   settings (LoRA dropout 0.05), its own dlm_id
    tests/golden/determinism/ranks2-<16 hex>.json  one tuple: {"format", "tuple_hash", "tuple",
                                                   "world_size", "document", "document_sha256",
                                                   "adapter_sha256"}

Its twin is the same document trained in one process with `gradient_accumulation_steps: 2`
(`twin_text`): the same micro-batches averaged per step, so the same adapter bytes,
dropout included: LoRA dropout masks are keyed by the global micro-batch index, not by
the process that draws them (`dlm.train.dropout`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from golden_tool import GOLDEN_DIR, GoldenRecord, parse_json_stdout, read_record

from dlm.atomic import atomic_write_json

RANKS = 2
RANKS_DOC = GOLDEN_DIR / "ranks2.dlm"


def ranks_file(repo: Path, thash: str) -> Path:
    """`tests/golden/determinism/ranks2-<first 16 hex>.json` under `repo`."""
    return repo / GOLDEN_DIR / f"ranks{RANKS}-{thash.removeprefix('sha256:')[:16]}.json"


class RanksGolden(GoldenRecord):
    """One stored two-rank golden: a `GoldenRecord` of `RANKS_DOC` that names its world size."""

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "world_size": RANKS, "document": RANKS_DOC.as_posix()}


def read_ranks_golden(repo: Path, thash: str) -> GoldenRecord | None:
    """The stored two-rank golden for `thash`, or None."""
    return read_record(ranks_file(repo, thash), RanksGolden)


def write_ranks_golden(repo: Path, record: RanksGolden) -> Path:
    path = ranks_file(repo, record.tuple_hash)
    atomic_write_json(path, record.to_json())
    return path


def twin_text(doc_text: str) -> str:
    """The single-process twin: the same document with `gradient_accumulation_steps: 2`."""
    assert "gradient_accumulation_steps" not in doc_text
    return doc_text.replace("\n  batch_size: 2\n", "\n  batch_size: 2\n  gradient_accumulation_steps: 2\n", 1)


def run_ranks(doc: Path, env: dict[str, str], *extra: str, timeout_s: float = 600) -> dict[str, Any]:
    """`python -m dlm train DOC --nproc 2 --json` in a fresh process; its JSON report.

    Raises:
        RuntimeError: the run failed (its stderr tail included).
    """
    cmd = [sys.executable, "-m", "dlm", "train", str(doc), "--nproc", str(RANKS), "--json", *extra]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return parse_json_stdout(proc.stdout)

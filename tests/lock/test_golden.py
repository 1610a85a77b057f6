"""The determinism golden: real `dlm train` runs of the embedded SmolLM2 in fresh processes.

Four trainings of `tests/golden/determinism/golden.dlm` (4 steps, sequence_len 64), shared
by the tests below:

    cold_a   fresh DLM_HOME a, PYTHONHASHSEED 1
    cold_b   fresh DLM_HOME b, PYTHONHASHSEED 2
    warm_a   DLM_HOME a again: every row comes from the tokenized-section cache
    nocache  DLM_HOME b again with --no-cache: every row tokenized from scratch

All four must leave byte-identical adapter folders, equal to the golden stored for this
machine's tuple (`scripts/regen-determinism-golden.py --approve` records one).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dlm.lock import adapter_sha256, read_lock
from dlm.lock.golden import (
    GOLDEN_DOC,
    file_sha256,
    golden_env,
    golden_tuple,
    read_golden,
    run_train,
    tuple_file,
    tuple_hash,
)

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / GOLDEN_DOC
REGEN = "python scripts/regen-determinism-golden.py --approve"


def _dlm_id() -> str:
    for line in DOC.read_text().splitlines():
        if line.startswith("dlm_id:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{DOC} has no dlm_id")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home_a = tmp_path_factory.mktemp("golden-home-a")
    home_b = tmp_path_factory.mktemp("golden-home-b")
    out: dict[str, Any] = {"home_a": home_a, "home_b": home_b}
    out["cold_a"] = run_train(DOC, golden_env(home_a, hash_seed=1))
    out["cold_b"] = run_train(DOC, golden_env(home_b, hash_seed=2))
    out["warm_a"] = run_train(DOC, golden_env(home_a, hash_seed=3))
    out["nocache"] = run_train(DOC, golden_env(home_b, hash_seed=4), extra_args=("--no-cache",))
    return out


def test_fresh_processes_train_byte_identical_adapters(runs: dict[str, Any]) -> None:
    a, b = runs["cold_a"], runs["cold_b"]
    assert adapter_sha256(Path(a["adapter_dir"])) == a["adapter_sha256"]
    assert adapter_sha256(Path(b["adapter_dir"])) == b["adapter_sha256"]
    assert a["adapter_sha256"] == b["adapter_sha256"]


def test_adapter_matches_the_golden_for_this_tuple(runs: dict[str, Any]) -> None:
    thash = tuple_hash(golden_tuple())
    record = read_golden(REPO, thash)
    if record is None:
        pytest.skip(f"no golden for tuple {thash} ({tuple_file(REPO, thash).name}); "
                    f"record one with `{REGEN}`")
    assert record.document_sha256 == file_sha256(DOC), (
        f"{GOLDEN_DOC} changed since its golden was recorded; rerun `{REGEN}`"
    )
    assert runs["cold_a"]["adapter_sha256"] == record.adapter_sha256, (
        f"training drifted from the golden for tuple {thash}; if the change is intended, "
        f"rerun `{REGEN}` and commit the result"
    )


def test_warm_cache_and_no_cache_reproduce_the_cold_adapter(runs: dict[str, Any]) -> None:
    cold, warm, nocache = runs["cold_a"], runs["warm_a"], runs["nocache"]
    tok = warm.get("tokenization") or {}
    if "cache_hits" in tok:
        assert tok["cache_hits"] > 0, "the second run in the same DLM_HOME should hit the cache"
    assert warm["adapter_sha256"] == cold["adapter_sha256"]
    assert nocache["adapter_sha256"] == cold["adapter_sha256"]


def test_lock_records_the_last_run(runs: dict[str, Any]) -> None:
    store = runs["home_a"] / "store" / _dlm_id()
    lock = read_lock(store / "dlm.lock")
    warm = runs["warm_a"]
    assert lock.last_run_id == warm["run_id"]
    assert lock.adapter_sha256 == warm["adapter_sha256"]
    assert lock.seed == 1234 and lock.torch_threads == 1
    assert lock.determinism_flags.full_determinism
    manifest = store / "manifest.json"
    if manifest.exists():
        assert json.loads(manifest.read_text())  # the lock sits next to a real manifest

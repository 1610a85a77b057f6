"""The determinism golden: real `dlm train` runs of the embedded SmolLM2 in fresh processes.

Three trainings of `tests/golden/determinism/golden.dlm` (4 steps, sequence_len 64), each
in a fresh process, shared by the tests below:

    cold_a   fresh DLM_HOME a, PYTHONHASHSEED 1: rows tokenized and written to the cache
    cold_b   fresh DLM_HOME b, PYTHONHASHSEED 2, --no-cache: rows tokenized, cache untouched
    warm_a   DLM_HOME a again, PYTHONHASHSEED 3: every row read from the cache

All three must leave byte-identical adapter folders, equal to the golden stored for this
machine's tuple (`scripts/regen-determinism-golden.py --approve` records one). On x86-64
Linux with AVX2 or better (pinned to AVX2 by `dlm.cpu_isa`) a missing golden fails; elsewhere
it is skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from golden_tool import (
    GOLDEN_DOC,
    file_sha256,
    golden_env,
    golden_required,
    golden_tuple,
    read_golden,
    run_train,
    tuple_file,
    tuple_hash,
)

from dlm.lock import adapter_sha256, read_lock

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
    out["cold_b"] = run_train(DOC, golden_env(home_b, hash_seed=2), extra_args=("--no-cache",))
    out["warm_a"] = run_train(DOC, golden_env(home_a, hash_seed=3))
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
        why = (
            f"no golden for tuple {thash} ({tuple_file(REPO, thash).name}: "
            f"{golden_tuple()['platform']}, {dict(golden_tuple()['versions'])})"
        )
        if not golden_required():
            pytest.skip(f"{why}; record one with `{REGEN}`")
        pytest.fail(
            f"{why}. On x86-64 Linux with AVX2 the pinned tuple must have a golden: install the "
            f"pinned versions (`make install`, constraints.txt) and leave the CPU ISA pinned "
            f"(torch here dispatches to {golden_tuple()['platform']['cpu_capability']}; unset "
            f"DLM_CPU_ISA/ATEN_CPU_CAPABILITY), or, for an intended new tuple, record it with `{REGEN}`"
        )
    assert record.document_sha256 == file_sha256(DOC), (
        f"{GOLDEN_DOC} changed since its golden was recorded; rerun `{REGEN}`"
    )
    assert runs["cold_a"]["adapter_sha256"] == record.adapter_sha256, (
        f"training drifted from the golden for tuple {thash}; if the change is intended, "
        f"rerun `{REGEN}` and commit the result"
    )


def test_cold_warm_and_uncached_tokenization_give_the_same_adapter(runs: dict[str, Any]) -> None:
    cold, warm, nocache = runs["cold_a"], runs["warm_a"], runs["cold_b"]
    assert cold["tokenization"]["cache_hits"] == 0
    assert warm["tokenization"]["cache_misses"] == 0 and warm["tokenization"]["cache_hits"] > 0
    assert warm["adapter_sha256"] == cold["adapter_sha256"]
    assert nocache["adapter_sha256"] == cold["adapter_sha256"]


def test_lock_records_the_last_run(runs: dict[str, Any]) -> None:
    store = runs["home_a"] / "store" / _dlm_id()
    lock = read_lock(store / "dlm.lock")
    warm = runs["warm_a"]
    assert lock.last_run_id == warm["run_id"]
    assert lock.adapter_sha256 == warm["adapter_sha256"]
    assert lock.seed == 1234 and lock.torch_threads == 1
    if golden_required():  # x86-64 with AVX2+: the lock records the pinned ISA, not the CPU's best
        assert lock.cpu_capability == "AVX2"
    assert lock.determinism_flags.full_determinism
    manifest = store / "manifest.json"
    if manifest.exists():
        assert json.loads(manifest.read_text())  # the lock sits next to a real manifest


def test_cli_refuses_a_damaged_lock_without_a_traceback(runs: dict[str, Any], tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(runs["home_a"], home)
    lock_file = home / "store" / _dlm_id() / "dlm.lock"
    lock_file.write_bytes(lock_file.read_bytes()[:200])
    env = golden_env(home, hash_seed=5)
    cmd = [sys.executable, "-m", "dlm", "train", str(DOC), "--json"]
    damaged = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert damaged.returncode == 1, damaged.stderr[-2000:]
    assert "dlm.lock" in damaged.stderr and "--update-lock" in damaged.stderr
    assert "Traceback" not in damaged.stderr
    clash = subprocess.run(
        [*cmd, "--strict-lock", "--ignore-lock"], env=env, capture_output=True, text=True, timeout=600
    )
    assert clash.returncode == 2 and "cannot be combined" in clash.stderr
    assert lock_file.read_bytes().startswith(b"{") and len(lock_file.read_bytes()) == 200

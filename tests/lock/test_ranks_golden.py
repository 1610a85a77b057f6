"""`dlm train --nproc 2` for real: two gloo ranks of the embedded SmolLM2 on CPU.

One two-rank run of `tests/golden/determinism/ranks2.dlm` and its single-process twin
(two accumulation steps), each in a fresh process with a fresh `DLM_HOME`, shared by the
tests below: the adapters are byte-identical to each other and to the stored two-rank
golden (`scripts/regen-ranks-golden.py --approve`; a missing one fails where the main
golden is required, x86-64 Linux with AVX2), rank 1 tokenized nothing, and rank 0 alone
wrote the store. Then the failure paths on a copy of that store: Ctrl-C and a rank
killed by a signal stop every rank, leave the adapter current, and leave no process; and
ranks started by hand (no launcher) whose documents differ both stop before training.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from golden_tool import file_sha256, golden_env, golden_required, golden_tuple, run_train, tuple_hash
from ranks_golden import RANKS_DOC, ranks_file, read_ranks_golden, run_ranks, twin_text

from dlm.lock import read_lock

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / RANKS_DOC
REGEN = "python scripts/regen-ranks-golden.py --approve"


def _dlm_id() -> str:
    return re.search(r"^dlm_id: (\S+)$", DOC.read_text(), re.M).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    home_r, home_t = tmp_path_factory.mktemp("ranks-home"), tmp_path_factory.mktemp("twin-home")
    twin = tmp_path_factory.mktemp("twin-doc") / "twin.dlm"
    twin.write_text(twin_text(DOC.read_text()))
    return {
        "home": home_r,
        "ranks": run_ranks(DOC, golden_env(home_r, hash_seed=1)),
        "twin": run_train(twin, golden_env(home_t, hash_seed=2)),
    }


def test_two_ranks_equal_one_process_accumulating_two_micro_batches(runs: dict[str, Any]) -> None:
    ranks, twin = runs["ranks"], runs["twin"]
    assert ranks["distributed"]["world_size"] == 2 and twin["distributed"] is None
    assert ranks["steps"] == twin["steps"] == 4
    assert ranks["adapter_sha256"] == twin["adapter_sha256"]


def test_two_ranks_match_the_golden_for_this_tuple(runs: dict[str, Any]) -> None:
    thash = tuple_hash(golden_tuple())
    record = read_ranks_golden(REPO, thash)
    if record is None:
        why = f"no two-rank golden for tuple {thash} ({ranks_file(REPO, thash).name})"
        if not golden_required():
            pytest.skip(f"{why}; record one with `{REGEN}`")
        pytest.fail(
            f"{why}. On x86-64 Linux with AVX2 the pinned tuple must have one: install the pinned "
            f"versions (`make install`) and keep the CPU ISA pin, or record it with `{REGEN}`"
        )
    assert record.document_sha256 == file_sha256(DOC), f"{RANKS_DOC} changed; rerun `{REGEN}`"
    assert runs["ranks"]["adapter_sha256"] == record.adapter_sha256, f"drifted from the golden; `{REGEN}`"


def test_rank_0_tokenizes_and_rank_1_reads_every_row_from_the_cache(runs: dict[str, Any]) -> None:
    rank0, rank1 = runs["ranks"]["distributed"]["ranks"]
    rows = runs["ranks"]["tokenization"]["total_sections"]
    assert (rank0["rank"], rank0["cache_misses"], rank0["cache_hits"]) == (0, rows, 0)
    assert (rank1["rank"], rank1["cache_misses"], rank1["cache_hits"]) == (1, 0, rows)


def test_rank_0_alone_writes_store_metrics_and_lock(runs: dict[str, Any]) -> None:
    store = runs["home"] / "store" / _dlm_id()
    assert sorted(p.name for p in (store / "adapter" / "versions").iterdir()) == ["v0001"]
    # closed on leaving the block: left to the collector, a connection can close (and remove
    # the WAL files) while a later test copies this home
    with closing(sqlite3.connect(store / "metrics.sqlite")) as db:
        assert db.execute("SELECT run_id, status, steps FROM runs").fetchall() == [
            (runs["ranks"]["run_id"], "completed", 4)
        ]
        assert [s for (s,) in db.execute("SELECT step FROM steps ORDER BY step")] == [1, 2, 3, 4]
        assert db.execute("SELECT count(*) FROM tokenization").fetchone() == (1,)
    lock = read_lock(store / "dlm.lock")
    assert (lock.world_size, lock.per_device_batch_size, lock.gradient_accumulation_steps, lock.backend) == (
        2,
        2,
        1,
        "gloo",
    )
    assert lock.adapter_sha256 == runs["ranks"]["adapter_sha256"]


def _processes_of(home: Path) -> list[int]:
    """Pids whose environment names `home` as DLM_HOME (the launcher and its ranks)."""
    marker = f"DLM_HOME={home}".encode() + b"\0"
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item)


def _rank_pid(home: Path, rank: int) -> int | None:
    """The pid of `rank` among the processes of `home` (None: not running)."""
    for pid in _processes_of(home):
        try:
            if _environ(pid).get("RANK") == str(rank):
                return pid
        except OSError:
            continue
    return None


def _stop_during_training(runs: dict[str, Any], tmp_path: Path, stop: Any) -> tuple[subprocess.CompletedProcess, Path]:
    """Retrain a copy of the store for many steps, call `stop(launcher, home)` once rank 0
    has logged a step of the new run, and wait until the launcher exits."""
    home = tmp_path / "home"
    shutil.copytree(runs["home"], home)
    metrics = home / "store" / _dlm_id() / "metrics.sqlite"
    cmd = [sys.executable, "-m", "dlm", "train", str(DOC), "--nproc", "2", "--max-steps", "500"]
    launcher = subprocess.Popen(
        cmd,
        env=golden_env(home, hash_seed=4),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and launcher.poll() is None:
            with closing(sqlite3.connect(metrics)) as db:
                (new_steps,) = db.execute(
                    "SELECT count(*) FROM steps WHERE run_id != ?", (runs["ranks"]["run_id"],)
                ).fetchone()
            if new_steps:
                break
            time.sleep(0.5)
        assert launcher.poll() is None, launcher.communicate()[1][-3000:]
        stop(launcher, home)
        out, err = launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(cmd, launcher.returncode, out, err), home


def _store_state(home: Path) -> tuple[str, list[str], str]:
    """(current version, versions on disk, status of the latest run)."""
    store = home / "store" / _dlm_id()
    with closing(sqlite3.connect(store / "metrics.sqlite")) as db:
        (status,) = db.execute("SELECT status FROM runs ORDER BY started_at DESC, rowid DESC LIMIT 1").fetchone()
    versions = sorted(p.name for p in (store / "adapter" / "versions").iterdir())
    return (store / "adapter" / "current").read_text().strip(), versions, status


def test_ctrl_c_stops_every_rank_and_keeps_the_adapter(runs: dict[str, Any], tmp_path: Path) -> None:
    done, home = _stop_during_training(runs, tmp_path, lambda p, h: os.killpg(p.pid, signal.SIGINT))
    assert done.returncode == 130, done.stderr[-3000:]
    assert _processes_of(home) == []
    current, versions, status = _store_state(home)
    assert current == "v0001" and versions == ["v0001"] and status == "interrupted"


def test_a_rank_killed_stops_the_run_with_one_line_naming_it(runs: dict[str, Any], tmp_path: Path) -> None:
    def kill_rank_1(launcher: subprocess.Popen, home: Path) -> None:
        pid = _rank_pid(home, 1)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)

    done, home = _stop_during_training(runs, tmp_path, kill_rank_1)
    assert done.returncode == 1, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "rank 1: killed by SIGKILL" in errors[0], done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert _processes_of(home) == []
    current, versions, status = _store_state(home)
    assert current == "v0001" and versions == ["v0001"] and status == "failed"


def test_ranks_started_by_hand_with_different_documents_all_stop(tmp_path: Path) -> None:
    """Two "machines" (processes started without a launcher, as a cluster scheduler
    would) whose copies of the document differ: both stop before training, naming rank 1."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    edited = tmp_path / "edited.dlm"
    edited.write_text(DOC.read_text().replace("thirty-one years", "thirty-two years", 1))
    procs = []
    for rank, doc in ((0, DOC), (1, edited)):
        env = golden_env(tmp_path / f"home-{rank}", hash_seed=rank + 1)
        env.update(
            RANK=str(rank),
            WORLD_SIZE="2",
            LOCAL_RANK="0",
            LOCAL_WORLD_SIZE="1",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "dlm", "train", str(doc)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = [p.communicate(timeout=300) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=False):
        assert proc.returncode == 1, err[-3000:]
        assert "rank 1: document sha256:" in err and "differs from rank 0's" in err, err[-3000:]
    assert not (tmp_path / "home-0" / "store" / _dlm_id() / "adapter" / "versions").exists()

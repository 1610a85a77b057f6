"""The encode pipeline's pieces and the prefetching walk: same results as in line."""

from __future__ import annotations

import os
import sysconfig
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import dlm.rows.listing as listing
from dlm.rows.walk import walk_sources
from dlm.tokenize.batch import AheadPipeline, compact_ids, encode_texts


def test_encode_texts_fast_equals_encode_batch(smollm2_tokenizer: Any) -> None:
    backend = smollm2_tokenizer.backend_tokenizer
    texts = [p.read_text() for p in sorted((Path(sysconfig.get_paths()["stdlib"]) / "json").glob("*.py"))]
    texts.append("Ünïcödé 日本語 🎉 12345<|im_end|>")
    slow = [e.ids for e in backend.encode_batch(texts, add_special_tokens=True)]
    assert encode_texts(backend, texts, add_special_tokens=True) == slow
    assert encode_texts(backend, [], add_special_tokens=True) == []


def test_compact_ids_widens_per_row_and_refuses_out_of_range() -> None:
    assert compact_ids([1, 65535], np.dtype(np.uint16)).dtype == np.uint16
    wide = compact_ids([1, 65536], np.dtype(np.uint16))
    assert wide.dtype == np.uint32 and wide.tolist() == [1, 65536]
    assert compact_ids([], np.dtype(np.uint16)).dtype == np.uint16
    for bad in ([-1], [1 << 32]):
        with pytest.raises(OverflowError):
            compact_ids(bad, np.dtype(np.uint16))


def test_pipeline_returns_results_in_order_at_most_depth_ahead() -> None:
    gate = threading.Event()
    started: list[int] = []

    def work(i: int) -> int:
        started.append(i)
        if i == 0:
            gate.wait(5)
        return i * 10

    pipe: AheadPipeline[int, int] = AheadPipeline(work, depth=2)
    try:
        assert pipe.submit(0) == [] and pipe.submit(1) == []  # 0 is held: nothing is due
        gate.set()
        got = pipe.submit(2) + pipe.submit(3) + pipe.drain()
        assert got == [0, 10, 20, 30]
    finally:
        pipe.close()


def test_pipeline_raises_the_worker_error_where_its_result_is_due() -> None:
    def work(i: int) -> int:
        if i == 1:
            raise ValueError("bad batch 1")
        return i

    pipe: AheadPipeline[int, int] = AheadPipeline(work, depth=1)
    try:
        pipe.submit(0)
        with pytest.raises(ValueError, match="bad batch 1"):
            pipe.submit(1)
            pipe.submit(2)
            pipe.drain()
    finally:
        pipe.close()


def _tree(root: Path) -> None:
    for rel in ["a.py", "b/c.py", "b/d.txt", "b/e/f.py", "skip/g.py", "z/h.py", "z/__pycache__/x.py"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / "big.py").write_text("x" * 5000)
    os.symlink(root / "b", root / "link-to-b")  # a folder reached twice: walked once
    os.symlink(root / "a.py", root / "link-a.py")
    os.symlink(root.parent, root / "up")  # escapes the root
    os.symlink(root / "missing", root / "dangling.py")
    os.mkfifo(root / "pipe.py")
    locked = root / "locked"
    locked.mkdir()
    (locked / "secret.py").write_text("s")
    locked.chmod(0)


@pytest.mark.parametrize("threads", [1, 4])
def test_prefetching_walk_equals_in_line_walk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    root = tmp_path / "root"
    root.mkdir()
    _tree(root)
    directive = SimpleNamespace(
        path=str(root),
        include=["**/*.py", "**/*.txt"],
        exclude=["skip/", "__pycache__/"],
        max_bytes_per_file=1000,
        max_files=6,
    )

    monkeypatch.setattr(listing, "WAIT_RATIO", 0.0)  # every listing counts as slow:
    monkeypatch.setattr(listing, "PROBE_ENTRIES", 0)  # the workers start after the first

    def walk(n: int) -> Any:
        monkeypatch.setattr(listing, "THREADS", n)
        result = walk_sources([directive], tmp_path)
        return [tuple(f) for f in result.files], dict(result.skipped), result.notes

    try:
        in_line, ahead = walk(0), walk(threads)
    finally:
        (root / "locked").chmod(0o755)
    assert ahead == in_line
    assert in_line[1]["escapes-root"] == 1 and any("max_files (6) reached" in n for n in in_line[2])


def test_workers_start_only_when_in_line_listings_are_slow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        (tmp_path / f"f{i}.txt").write_text("x")

    def lister() -> listing.Prefetcher:
        p = listing.Prefetcher(listing.ListRules(lambda rel: True, lambda rel: True, 0, 1000), threads=2)
        assert len(p.get(str(tmp_path), "") or []) == 3
        return p

    monkeypatch.setattr(listing, "PROBE_ENTRIES", 3)
    monkeypatch.setattr(listing, "WAIT_RATIO", 1e9)  # no listing waits a billion times its CPU time
    fast = lister()
    assert fast.pool is None and fast.in_line_entries == 3
    fast.ahead(str(tmp_path), "")
    assert not fast.pending  # no workers: nothing is listed ahead
    monkeypatch.setattr(listing, "WAIT_RATIO", 0.0)
    slow = lister()
    assert slow.pool is not None
    slow.ahead(str(tmp_path), "")
    assert len(slow.get(str(tmp_path), "") or []) == 3 and not slow.pending
    slow.close()
    monkeypatch.setattr(listing, "PROBE_ENTRIES", 4)  # too few entries seen to judge
    assert lister().pool is None

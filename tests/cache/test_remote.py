"""The remote tier against real remotes (a second folder; moto's S3 server through
s3fs), and its fault matrix. Each fault test was shown able to fail by disabling the
check it relies on (the sha256-of-bytes verification in `_admit_index`/`_admit_pack`,
the deadline in `bounded`, the write order in `_push_pack`), then restoring it."""

from __future__ import annotations

import errno
import os
import socket
import threading
from pathlib import Path

import pytest
from cachehelp import FAKE_SHA, FakeBackend, FakeTokenizer, make_tree, row_set, same_rows
from remotehelp import remote_fs, run_home

from dlm.cache import check_cache
from dlm.cache.schema import connect
from dlm.errors import CacheError
from dlm.tokenize.plain import PlainRowEncoder


def plain(rows, tokenizer=None, sha=FAKE_SHA):
    return PlainRowEncoder(tokenizer or FakeTokenizer(), sha).tokenize(rows)


def objects(url: str, folder: str) -> list[str]:
    fs, root = remote_fs(url)
    try:
        return sorted(p for p in fs.ls(f"{root}/{folder}", detail=False) if not p.endswith("/"))
    except FileNotFoundError:
        return []


def test_fresh_home_is_warm_from_the_remote(tree: Path, tmp_path: Path, remote_url: str):
    rows = row_set(tree)
    _, first = run_home(tmp_path / "h1", rows, remote_url)
    assert first.remote[1].entries == first.admitted > 0
    got, rep = run_home(tmp_path / "h2", rows, remote_url)
    assert same_rows(got, plain(rows))
    assert rep.admitted == 0 and got.stats.cache_misses == 0 and not rep.warnings
    assert rep.remote[0].entries == first.admitted
    assert rep.remote[1].entries == 0  # nothing new to push
    assert check_cache(tmp_path / "h2" / "store").ok


def test_stat_snapshots_never_travel(tree: Path, tmp_path: Path):
    url = str(tmp_path / "remote")
    run_home(tmp_path / "h1", row_set(tree), url)
    sent = b"".join(p.read_bytes() for p in (tmp_path / "remote").rglob("*") if p.is_file())
    assert str(tree).encode() not in sent and b"DLMSTAT" not in sent


# --- fault matrix -------------------------------------------------------------------


class ShiftedBackend(FakeBackend):
    def encode_batch(self, texts, add_special_tokens=True):
        return [type(e)([i + 1 for i in e.ids]) for e in super().encode_batch(texts, add_special_tokens)]


class ShiftedTokenizer(FakeTokenizer):
    def __init__(self) -> None:
        super().__init__(259)
        self.backend_tokenizer = ShiftedBackend()


def test_tokenizer_swapped(tree: Path, tmp_path: Path, remote_url: str):
    rows = row_set(tree)
    run_home(tmp_path / "h1", rows, remote_url)
    other_sha = "sha256:" + "e" * 64
    got, rep = run_home(tmp_path / "h2", rows, remote_url, tokenizer=ShiftedTokenizer(), sha=other_sha)
    assert same_rows(got, plain(rows, ShiftedTokenizer(), other_sha))
    assert rep.remote[0].entries == 0 and got.stats.cache_hits == 0


def test_chat_template_changed(tree: Path, tmp_path: Path, remote_url: str):
    rows = row_set(tree)
    run_home(tmp_path / "h1", rows, remote_url)
    from dlm.rows.types import RowSet, TextRow

    changed = RowSet(
        rows.text_rows[:-1]
        + [TextRow("instruction", "<|user|>hi<|bot|>yo", "doc.dlm:99", prompt_text="<|user|>hi<|bot|>")],
        rows.file_rows,
    )
    got, rep = run_home(tmp_path / "h2", changed, remote_url)
    assert same_rows(got, plain(changed)) and rep.admitted == 1


def test_file_edited(tree: Path, tmp_path: Path, remote_url: str):
    run_home(tmp_path / "h1", row_set(tree), remote_url)
    (tree / "pkg3" / "mod_0003.py").write_text("changed on the second machine\n")
    rows = row_set(tree)
    got, rep = run_home(tmp_path / "h2", rows, remote_url)
    assert same_rows(got, plain(rows)) and rep.admitted == 1


def _damage(url: str, folder: str, how: str) -> None:
    fs, root = remote_fs(url)
    path = objects(url, folder)[0]
    data = bytearray(fs.cat_file(path))
    if how == "truncated":
        data = data[: len(data) // 2]
    elif how == "bit-flipped":
        data[len(data) // 3] ^= 0x04
    else:  # overwritten at the same URL with another, well-formed object
        other = tmp_tree_pack(url)
        data = bytearray(other)
    fs.pipe_file(path, bytes(data))


def tmp_tree_pack(url: str) -> bytes:
    """A well-formed pack of other entries, as a foreign writer would upload it."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        make_tree(Path(tmp) / "t", 5, seed=42)
        other = f"{tmp}/other-remote"
        run_home(Path(tmp) / "h", row_set(Path(tmp) / "t"), other)
        return next(Path(other, "packs").iterdir()).read_bytes()


DAMAGE = [
    (kind, folder, how)
    for folder in ("packs", "index")
    for how in ("truncated", "bit-flipped", "overwritten")
    for kind in ("dir", "s3")
    if kind == "dir" or how == "overwritten"
]


@pytest.mark.parametrize(("kind", "folder", "how"), DAMAGE)
def test_damaged_remote_object_is_a_miss_never_wrong_ids(
    tree: Path, tmp_path: Path, request, kind: str, folder: str, how: str
):
    """Every damage on the folder remote; on S3, the overwrite at the same URL (the
    rest is the same verification, whatever the transport)."""
    remote_url = str(tmp_path / "remote-folder") if kind == "dir" else request.getfixturevalue("s3_bucket")
    rows = row_set(tree)
    run_home(tmp_path / "h1", rows, remote_url)
    _damage(remote_url, folder, how)
    got, rep = run_home(tmp_path / "h2", rows, remote_url)
    assert same_rows(got, plain(rows))
    assert rep.remote[0].rejected == 1 and rep.remote[0].entries == 0
    assert any("damaged" in w or "altered" in w for w in rep.warnings)
    assert got.stats.cache_misses == len(got)


def test_two_homes_pushing_at_once(tmp_path: Path, remote_url: str):
    trees = []
    for i in range(2):
        make_tree(tmp_path / f"t{i}", 30, seed=i)
        make_tree(tmp_path / f"t{i}" / "shared", 10, seed=7)  # entries both push
        trees.append(row_set(tmp_path / f"t{i}"))
    errors: list[BaseException] = []

    def push(i: int) -> None:
        try:
            run_home(tmp_path / f"h{i}", trees[i], remote_url, max_segment_bytes=4096)
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=push, args=(i,)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert not errors
    for i in range(2):
        got, rep = run_home(tmp_path / "h3", trees[i], remote_url, doc=f"D{i}")
        assert same_rows(got, plain(trees[i])) and rep.admitted == 0 and not rep.warnings


@pytest.fixture
def black_hole():
    """A TCP port that accepts connections and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    sock.close()


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_unreachable_remote_warns_and_the_run_goes_on(tree: Path, tmp_path: Path, monkeypatch, black_hole, kind):
    monkeypatch.setenv("DLM_CACHE_REMOTE_TIMEOUT", "1")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    endpoint = f"http://127.0.0.1:{port}" if kind == "refused" else black_hole
    for name, value in (
        ("AWS_ACCESS_KEY_ID", "t"),
        ("AWS_SECRET_ACCESS_KEY", "t"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", endpoint),
    ):
        monkeypatch.setenv(name, value)
    rows = row_set(tree)
    got, rep = run_home(tmp_path / "h", rows, "s3://nowhere/cache")
    assert same_rows(got, plain(rows))
    assert [w for w in rep.warnings if "cache remote unavailable" in w]
    assert rep.admitted == len(got)


def test_disk_full_while_pulling(tree: Path, tmp_path: Path):
    url = str(tmp_path / "remote")
    rows = row_set(tree)
    run_home(tmp_path / "h1", rows, url)

    def full(fd, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(CacheError, match="disk full"):
        run_home(tmp_path / "h2", rows, url, segment_write=full)
    assert check_cache(tmp_path / "h2" / "store").ok
    got, rep = run_home(tmp_path / "h2", rows, url)
    assert same_rows(got, plain(rows)) and rep.admitted == 0 and rep.remote[0].entries == len(got)


# --- kill -9 during push and pull -----------------------------------------------------

WORKER = Path(__file__).with_name("remote_worker.py")
REPO = Path(__file__).resolve().parents[2]


def _kill_loop(tmp_path: Path, tree: Path, url: str, mode: str, rounds: int, seed: int) -> None:
    import random
    import subprocess
    import sys
    import time

    rng = random.Random(seed)
    env = dict(os.environ, PYTHONPATH=f"{WORKER.parent}:{REPO / 'src'}")
    for i in range(rounds):
        home = tmp_path / f"k{mode}{i % 2}"
        proc = subprocess.Popen(
            [sys.executable, str(WORKER), mode, str(home), str(tree), url],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        proc.stdout.readline()  # started its run
        time.sleep(rng.uniform(0.0, 0.3))
        proc.kill()
        proc.wait()
        assert check_cache(home / "store").ok
    rows = row_set(tree)
    got, rep = run_home(tmp_path / "final", rows, url)
    assert same_rows(got, plain(rows))
    assert rep.remote[0].rejected == 0 and check_cache(tmp_path / "final" / "store").ok


@pytest.mark.parametrize("mode", ["push", "pull"])
def test_kill_9_during_push_and_pull(tmp_path: Path, mode: str):
    tree = tmp_path / "big"
    make_tree(tree, 300, size=2000)
    url = str(tmp_path / "remote")
    if mode == "pull":
        run_home(tmp_path / "seed", row_set(tree), url, max_segment_bytes=8192)
    _kill_loop(tmp_path, tree, url, mode, rounds=2, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["push", "pull"])
def test_kill_9_during_push_and_pull_many_times(tmp_path: Path, mode: str, s3_bucket: str):
    tree = tmp_path / "big"
    make_tree(tree, 600, size=4000)
    for url in (str(tmp_path / "remote"), s3_bucket):
        if mode == "pull":
            run_home(tmp_path / "seed", row_set(tree), url, max_segment_bytes=8192)
        _kill_loop(tmp_path, tree, url, mode, rounds=20, seed=7)


def test_remote_counts_reach_the_store_index(tree: Path, tmp_path: Path):
    url = str(tmp_path / "remote")
    run_home(tmp_path / "h1", row_set(tree), url)
    conn = connect(tmp_path / "h1" / "store")
    assert (
        conn.execute("SELECT COUNT(*) FROM remote_entries").fetchone()[0]
        == len(objects(url, "index")) * 0 + conn.execute("SELECT COUNT(*) FROM entries").fetchone()[0]
    )


def test_an_emptied_remote_gets_everything_pushed_again(tree: Path, tmp_path: Path):
    import shutil

    url = str(tmp_path / "remote")
    rows = row_set(tree)
    run_home(tmp_path / "h1", rows, url)
    shutil.rmtree(tmp_path / "remote")  # the bucket was recreated
    from dlm.cache.remote import RemoteTier

    conn = connect(tmp_path / "h1" / "store")
    tier = RemoteTier(url, conn, tmp_path / "h1" / "store", print)
    assert tier.push() == len(rows.text_rows) + len(rows.file_rows) - 1  # the binary file has no entry
    got, rep = run_home(tmp_path / "h2", rows, url)
    assert rep.admitted == 0 and same_rows(got, plain(rows))


@pytest.fixture
def closed_port() -> int:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_an_ftp_remote_is_opened_under_the_deadline(
    tree: Path, tmp_path: Path, monkeypatch, black_hole, closed_port: int, kind: str
):
    """fsspec's ftp file system connects when it is made: a refused one gives the
    warning, a silent one gives it after the deadline, not after ftplib's 30 s."""
    monkeypatch.setenv("DLM_CACHE_REMOTE_TIMEOUT", "1")
    port = closed_port if kind == "refused" else int(black_hole.rsplit(":", 1)[1])
    rows = row_set(tree)
    got, rep = run_home(tmp_path / "h", rows, f"ftp://127.0.0.1:{port}/cache")
    assert same_rows(got, plain(rows))
    assert [w for w in rep.warnings if "cache remote unavailable" in w]


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-1", "0", "1e300"])
def test_a_bad_remote_timeout_is_one_error_naming_the_variable(tree: Path, tmp_path: Path, monkeypatch, value: str):
    monkeypatch.setenv("DLM_CACHE_REMOTE_TIMEOUT", value)
    rows = row_set(tree)
    with pytest.raises(CacheError, match="DLM_CACHE_REMOTE_TIMEOUT"):
        run_home(tmp_path / "h", rows, str(tmp_path / "remote"))
    got, _ = run_home(tmp_path / "h2", rows, None)  # no remote: the variable is never read
    assert same_rows(got, plain(rows))


def test_junk_index_objects_are_reported_once_and_not_fetched_again(tree: Path, tmp_path: Path):
    """300 junk objects under index/: one warning line on the first run, none and no
    fetch of them after; one rewritten at another size is looked at again."""
    url = str(tmp_path / "remote")
    rows = row_set(tree)
    run_home(tmp_path / "h1", rows, url)
    index = Path(url) / "index"
    for i in range(300):
        (index / f"{i:064x}.idx").write_bytes(b"junk %d" % i)
    got, rep = run_home(tmp_path / "h2", rows, url)
    assert same_rows(got, plain(rows)) and rep.remote[0].entries == len(got)
    junk = [w for w in rep.warnings if "index" in w]
    assert len(junk) == 1 and "300 damaged or foreign index objects" in junk[0]
    got, rep = run_home(tmp_path / "h2", rows, url, run_id="r2")
    assert rep.warnings == [] and rep.remote[0].rejected == 0
    (index / f"{7:064x}.idx").write_bytes(b"other junk, longer")
    _, rep = run_home(tmp_path / "h2", rows, url, run_id="r3")
    assert rep.remote[0].rejected == 1 and "1 damaged or foreign" in rep.warnings[0]

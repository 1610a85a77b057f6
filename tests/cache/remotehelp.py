"""Helpers of the remote-tier tests: a home (store + a document's state) and its run."""

from __future__ import annotations

from pathlib import Path

from cachehelp import FAKE_SHA, FakeTokenizer

from dlm.cache import CachedRowEncoder


def run_home(
    home: Path,
    rows,
    remote: str | None,
    *,
    doc: str = "DOC",
    run_id: str = "r",
    tokenizer=None,
    sha: str = FAKE_SHA,
    **kw,
):
    """One cached run in `home` (its own store and document state); (rows, report)."""
    tok = CachedRowEncoder(
        home / "state",
        tokenizer or FakeTokenizer(),
        sha,
        run_id=run_id,
        store_dir=home / "store",
        doc_id=doc,
        remote=remote,
        **kw,
    )
    got = tok.tokenize(rows)
    return got, tok.last_report


def remote_fs(url: str):
    """(fsspec filesystem, root path) of a remote URL."""
    import fsspec

    return (
        fsspec.core.url_to_fs(url, skip_instance_cache=True) if url.startswith("s3://") else fsspec.core.url_to_fs(url)
    )

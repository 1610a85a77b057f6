"""The cache verbs for one document: resolve its store, tokenizer, rows, settings and
the shared section store (`dlm.paths.cache_store_dir`; the document's own state stays
in `store.cache_state_dir`), then call the plain verbs of the section cache (`dlm.cache`).
`dlm cache ...` calls exactly one of these per command."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm.actions.common import DocPath, base_tokenizer, doc_dir, open_document
from dlm.cache.schema import connect, key_text
from dlm.cache.shared import clear_document, migrate_legacy, unpack_keys
from dlm.cache.verbs import (
    BuildResult,
    ClearResult,
    PruneResult,
    build_cache,
    cache_summary,
    clear_cache,
    parse_age,
    prune_cache,
)
from dlm.doc import Document
from dlm.errors import CacheError, UsageError
from dlm.paths import cache_store_dir
from dlm.store import Store
from dlm.tokenize.seam import Progress

if TYPE_CHECKING:
    from dlm.cache.portable import ExportResult, ImportResult
    from dlm.cache.remote import RemoteCounts

DAY_S = 86400
__all__ = [
    "RemoteResult",
    "cache_build",
    "cache_clear",
    "cache_state_dir",
    "cache_export",
    "cache_import",
    "cache_prune",
    "cache_pull",
    "cache_push",
    "cache_show",
]


def cache_state_dir(path: DocPath) -> Path:
    """Where the document's cache state lives (it may not exist yet); its entries live
    in the shared store, `dlm.paths.cache_store_dir()`."""
    return open_document(path)[1].cache_state_dir


def _summary(store: Store) -> dict[str, Any] | None:
    migrate_legacy(store.cache_state_dir, cache_store_dir())
    return cache_summary(cache_store_dir(), store.cache_state_dir, store.dlm_id)


def cache_show(path: DocPath) -> dict[str, Any] | None:
    """`cache_summary` of the shared store as this document sees it (None: no cache yet).

    Raises:
        DocError: the document cannot be parsed.
        CacheError: the index exists but cannot be read (never reported as 0 entries).
    """
    summary = _summary(open_document(path)[1])
    if summary is not None and summary["error"]:
        raise CacheError(summary["error"])
    return summary


def document_cache_summary(store: Store) -> dict[str, Any] | None:
    """`cache_show` for an already opened store (`dlm show --json`'s `training_cache`)."""
    return _summary(store)


def cache_prune(path: DocPath, older_than: str | None = None, *, whole_store: bool = False) -> PruneResult:
    """Prune entries unused for `older_than` (`30d`, `12h`; default: the document's
    `training.cache.prune_older_than_days`): those only this document uses, or with
    `whole_store` every such entry of the shared store.

    Raises:
        UsageError: a malformed age. CacheError: no cache or an unreadable index.
    """
    doc, store = open_document(path)
    seconds = parse_age(older_than) if older_than else doc.frontmatter.training.cache.prune_older_than_days * DAY_S
    _require(store)
    if whole_store:
        return prune_cache(cache_store_dir(), seconds)
    cutoff = int(max(time.time() - seconds, -(2.0**62)))
    done = clear_document(cache_store_dir(), store.cache_state_dir, store.dlm_id, older_than_cutoff_s=cutoff)
    after = cache_summary(cache_store_dir())
    return PruneResult(
        seconds, done.removed_entries, done.removed_bytes, after["entry_bytes"] if after else 0, 0, 0, 0, 0
    )


def cache_clear(path: DocPath, *, whole_store: bool = False) -> ClearResult:
    """Remove the entries only this document uses and forget its state (entries
    another document uses stay); with `whole_store`, empty the shared store."""
    store = open_document(path)[1]
    store_dir = cache_store_dir()
    if whole_store:
        return clear_cache(store_dir)
    migrate_legacy(store.cache_state_dir, store_dir)
    if cache_summary(store_dir) is None:
        return ClearResult(str(store.cache_state_dir), False, 0, 0)
    done = clear_document(store_dir, store.cache_state_dir, store.dlm_id)
    return ClearResult(str(store.cache_state_dir), True, done.removed_entries, done.removed_bytes)


def cache_export(path: DocPath, dest: Path) -> ExportResult:
    """Write the shared store's entries to one portable file (see `dlm.cache.portable`).

    Raises:
        CacheError: no cache yet, or `dest` cannot be written.
    """
    from dlm.cache.portable import export_cache

    _require(open_document(path)[1])
    return export_cache(cache_store_dir(), Path(dest))


def cache_import(path: DocPath, src: Path) -> ImportResult:
    """Admit an export made with this document's tokenizer into the shared store.

    Raises:
        CacheError: another tokenizer, a damaged or foreign file.
    """
    from dlm.cache.portable import import_cache

    doc, store = open_document(path)
    migrate_legacy(store.cache_state_dir, cache_store_dir())
    _, _, sha = base_tokenizer(doc)
    return import_cache(cache_store_dir(), Path(src), sha, max_bytes=doc.frontmatter.training.cache.max_bytes)


def cache_build(
    path: DocPath, progress: Progress | None = None, *, rehash: bool = False, remote: str | None = None
) -> BuildResult:
    """Tokenize every row of the document into the shared store, without training.
    `files_skipped` counts the walk's skips and the read's. `rehash`: read and hash
    every file even if its stat is unchanged (as `training.cache.trust_stat: false`).
    `remote`: the remote tier (overrides `$DLM_CACHE_REMOTE` and `training.cache.remote`).

    Raises:
        SourceError: a `training.sources` directive cannot be walked (a missing root is
            reported before any model work, `dlm.rows.build.check_inputs`).
        BaseModelError: the base model spec is unknown or cannot be resolved.
        CacheError: the cache cannot be written.
    """
    from ulid import ULID

    from dlm.cache.remote import resolve_remote
    from dlm.rows.build import build_rows, check_inputs

    doc, store = open_document(path)
    check_inputs(doc)  # a bad source path or base_model is one line before any model work
    _, tokenizer, sha = base_tokenizer(doc)
    built = build_rows(doc, tokenizer)
    tokenizer.save()  # chat-template renderings, so the next warm build loads no tokenizer
    cfg = doc.frontmatter.training.cache
    result = build_cache(
        store.cache_state_dir,
        tokenizer,
        sha,
        built.rows,
        max_bytes=cfg.max_bytes,
        run_id=f"build-{ULID()}",
        progress=progress,
        trust_stat=cfg.trust_stat and not rehash,
        store_dir=cache_store_dir(),
        doc_id=store.dlm_id,
        remote=resolve_remote(cfg.remote, remote, doc_dir(doc)),
    )
    skipped = Counter(result.files_skipped) + built.walk.skipped
    return replace(result, files_skipped=dict(skipped), warnings=built.walk.notes + result.warnings)


@dataclass(frozen=True)
class RemoteResult:
    """Outcome of `dlm cache push` / `pull`: entries, objects and stored bytes moved."""

    remote: str
    entries: int
    objects: int
    bytes: int
    rejected: int
    seconds: float
    warnings: list[str]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _remote_url(doc: Document, override: str | None) -> str:
    from dlm.cache.remote import resolve_remote

    url = resolve_remote(doc.frontmatter.training.cache.remote, override, doc_dir(doc))
    if url is None:
        raise UsageError("no cache remote: pass --cache-remote URL, set DLM_CACHE_REMOTE, or set training.cache.remote")
    return url


def _move(path: DocPath, override: str | None, push: bool) -> RemoteResult:
    from dlm.cache.remote import RemoteTier

    doc, store = open_document(path)
    url = _remote_url(doc, override)
    store_dir = cache_store_dir()
    migrate_legacy(store.cache_state_dir, store_dir)
    warnings: list[str] = []
    conn = connect(store_dir)
    counts: RemoteCounts
    try:
        tier = RemoteTier(url, conn, store_dir, warnings.append)
        if push:
            mine = conn.execute("SELECT keys FROM doc_refs WHERE doc = ?", (store.dlm_id,)).fetchone()
            tier.push([key_text(k) for k in unpack_keys(mine[0])] if mine else [])
            counts = tier.pushed
        else:
            _, _, sha = base_tokenizer(doc)
            tier.pull(None, tokenizer=sha)
            counts = tier.pulled
    finally:
        conn.close()
    if not tier.alive:
        raise CacheError(
            f"cache remote unavailable ({tier.failure}); the {'push' if push else 'pull'} did not "
            "complete: check the URL, its credentials and the network"
        )
    return RemoteResult(url, counts.entries, counts.objects, counts.bytes, counts.rejected, counts.seconds, warnings)


def cache_push(path: DocPath, remote: str | None = None) -> RemoteResult:
    """Send the entries of the document's latest run that the remote lacks.

    Raises:
        UsageError: no remote configured. CacheError: the remote is unreachable.
    """
    return _move(path, remote, push=True)


def cache_pull(path: DocPath, remote: str | None = None) -> RemoteResult:
    """Fetch every remote entry made with this document's tokenizer that the local
    store lacks (a fresh machine's warm-up before `dlm train`).

    Raises:
        UsageError: no remote configured. CacheError: the remote is unreachable, or
            the local disk is full (nothing half-written is ever indexed).
    """
    return _move(path, remote, push=False)


def _require(store: Store) -> None:
    migrate_legacy(store.cache_state_dir, cache_store_dir())
    if cache_summary(cache_store_dir()) is None:
        raise CacheError(
            f"{cache_store_dir()}: no tokenized-section cache yet; run `dlm cache build` or `dlm train` first"
        )

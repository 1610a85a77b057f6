"""The cache verbs for one document: resolve its tokenizer, rows and settings, then
call the plain verbs of `dlm.cache.verbs` / `dlm.cache.portable`. `dlm cache ...`
calls exactly one of these per command."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from dlm.cache.portable import ExportResult, ImportResult, export_cache, import_cache
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
from dlm.errors import CacheError
from dlm.tokenize.seam import Progress

DAY_S = 86400


def _tokenizer(doc: Any) -> tuple[Any, str]:
    from dlm.models import load_tokenizer, resolve_base_model
    from dlm.tokenize.fingerprint import tokenizer_sha256

    ref = resolve_base_model(doc.frontmatter.base_model, relative_to=doc.path.parent if doc.path else None)
    tokenizer = load_tokenizer(ref)
    return tokenizer, tokenizer_sha256(tokenizer)


def document_cache_summary(store: Any) -> dict[str, Any] | None:
    """`cache_summary` of the document's store (None: no cache yet)."""
    return cache_summary(store.cache_dir)


def prune_document_cache(doc: Any, store: Any, older_than: str | None) -> PruneResult:
    """Prune entries unused for `older_than` (`30d`, `12h`; default: the document's
    `training.cache.prune_older_than_days`).

    Raises:
        UsageError: a malformed age. CacheError: no cache or an unreadable index.
    """
    seconds = parse_age(older_than) if older_than else doc.frontmatter.training.cache.prune_older_than_days * DAY_S
    _require(store)
    return prune_cache(store.cache_dir, seconds)


def clear_document_cache(store: Any) -> ClearResult:
    """Empty the document's cache (see `clear_cache`)."""
    return clear_cache(store.cache_dir)


def export_document_cache(store: Any, dest: Path) -> ExportResult:
    """Write the document's cache to one portable file (see `dlm.cache.portable`)."""
    _require(store)
    return export_cache(store.cache_dir, dest)


def import_document_cache(doc: Any, store: Any, src: Path) -> ImportResult:
    """Admit an export made with this document's tokenizer.

    Raises:
        CacheError: another tokenizer, a damaged or foreign file.
    """
    _, sha = _tokenizer(doc)
    return import_cache(store.cache_dir, src, sha, max_bytes=doc.frontmatter.training.cache.max_bytes)


def build_document_cache(
    doc: Any, store: Any, progress: Progress | None = None, *, rehash: bool = False
) -> BuildResult:
    """Tokenize every row of the document into its cache, without training.
    `files_skipped` counts the walk's skips and the read's. `rehash`: read and hash
    every file even if its stat is unchanged (as `training.cache.trust_stat: false`).

    Raises:
        SourceError: a `training.sources` directive cannot be walked.
        CacheError: the cache cannot be written.
    """
    from ulid import ULID

    from dlm.rows import build_rows

    tokenizer, sha = _tokenizer(doc)
    built = build_rows(doc, tokenizer)
    cfg = doc.frontmatter.training.cache
    result = build_cache(
        store.cache_dir, tokenizer, sha, built.rows,
        max_bytes=cfg.max_bytes, run_id=f"build-{ULID()}", progress=progress,
        trust_stat=cfg.trust_stat and not rehash,
    )
    skipped = Counter(result.files_skipped) + built.walk.skipped
    return replace(result, files_skipped=dict(skipped), warnings=built.walk.notes + result.warnings)


def _require(store: Any) -> None:
    if cache_summary(store.cache_dir) is None:
        raise CacheError(
            f"{store.cache_dir}: no tokenized-section cache yet; run `dlm cache build` or `dlm train` first"
        )

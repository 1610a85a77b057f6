"""The cache verbs for one document: resolve its store, tokenizer, rows and settings,
then call the plain verbs of the section cache (`dlm.cache`). `dlm cache ...` calls
exactly one of these per command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlm.actions.common import DocPath, base_tokenizer, open_document
from dlm.cache import (
    BuildResult,
    ClearResult,
    ExportResult,
    ImportResult,
    PruneResult,
    build_cache,
    cache_summary,
    clear_cache,
    export_cache,
    format_hit_rate,
    import_cache,
    parse_age,
    prune_cache,
)
from dlm.errors import CacheError
from dlm.tokenize.seam import Progress

DAY_S = 86400
__all__ = [
    "cache_build", "cache_clear", "cache_dir", "cache_export", "cache_import", "cache_prune", "cache_show",
    "format_hit_rate",
]


def cache_dir(path: DocPath) -> Path:
    """Where the document's tokenized-section cache lives (it may not exist yet)."""
    return open_document(path)[1].cache_dir


def cache_show(path: DocPath) -> dict[str, Any] | None:
    """`cache_summary` of the document's cache (None: no cache yet).

    Raises:
        DocError: the document cannot be parsed.
    """
    return cache_summary(open_document(path)[1].cache_dir)


def cache_prune(path: DocPath, older_than: str | None = None) -> PruneResult:
    """Prune entries unused for `older_than` (`30d`, `12h`; default: the document's
    `training.cache.prune_older_than_days`).

    Raises:
        UsageError: a malformed age. CacheError: no cache or an unreadable index.
    """
    doc, store = open_document(path)
    seconds = parse_age(older_than) if older_than else doc.frontmatter.training.cache.prune_older_than_days * DAY_S
    _require(store.cache_dir)
    return prune_cache(store.cache_dir, seconds)


def cache_clear(path: DocPath) -> ClearResult:
    """Empty the document's cache (see `dlm.cache.clear_cache`)."""
    return clear_cache(open_document(path)[1].cache_dir)


def cache_export(path: DocPath, dest: Path) -> ExportResult:
    """Write the document's cache to one portable file (see `dlm.cache.portable`).

    Raises:
        CacheError: no cache yet, or `dest` cannot be written.
    """
    store = open_document(path)[1]
    _require(store.cache_dir)
    return export_cache(store.cache_dir, Path(dest))


def cache_import(path: DocPath, src: Path) -> ImportResult:
    """Admit an export made with this document's tokenizer.

    Raises:
        CacheError: another tokenizer, a damaged or foreign file.
    """
    doc, store = open_document(path)
    _, _, sha = base_tokenizer(doc)
    return import_cache(store.cache_dir, Path(src), sha, max_bytes=doc.frontmatter.training.cache.max_bytes)


def cache_build(path: DocPath, progress: Progress | None = None) -> BuildResult:
    """Tokenize every row of the document into its cache, without training.

    Raises:
        SourceError: a `training.sources` directive cannot be walked.
        CacheError: the cache cannot be written.
    """
    from ulid import ULID

    from dlm.rows.build import build_rows

    doc, store = open_document(path)
    _, tokenizer, sha = base_tokenizer(doc)
    built = build_rows(doc, tokenizer)
    return build_cache(
        store.cache_dir, tokenizer, sha, built.rows,
        max_bytes=doc.frontmatter.training.cache.max_bytes, run_id=f"build-{ULID()}", progress=progress,
    )


def _require(folder: Path) -> None:
    if cache_summary(folder) is None:
        raise CacheError(f"{folder}: no tokenized-section cache yet; run `dlm cache build` or `dlm train` first")

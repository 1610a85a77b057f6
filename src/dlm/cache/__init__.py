"""The tokenized-section cache: rows' token ids persisted per document store.

Public API:
- `CachedRowEncoder` (the tokenize seam over the cache) and its `CacheRunReport`;
- library verbs behind `dlm cache ...`, each returning a result value:
  `cache_summary`, `prune_cache`, `clear_cache`, `build_cache`, `check_cache`,
  `export_cache`, `import_cache`; `parse_age` for `--older-than`.

Layout, keys, index schema, eviction and guarantees: `docs/cache.md` and the module
docstrings of `schema` (index tables, migrations), `segments` (segment files),
`index` (entry rows and their check), `statindex` (change detection), `session` and
`reader` (one tokenize call, lazy reads), `evict` (bounds), `portable` (export).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# names load their module on first use (PEP 562): `dlm cache show` needs the index
# schema, not the tokenizing session or the export format, and every module here
# is imported by some command that must start fast
_HOME = {
    "ExportResult": "portable",
    "ImportResult": "portable",
    "export_cache": "portable",
    "import_cache": "portable",
    "DEFAULT_MAX_BYTES": "encoder",
    "CachedRowEncoder": "encoder",
    "CacheRunReport": "encoder",
    "BuildResult": "verbs",
    "ClearResult": "verbs",
    "HealthReport": "verbs",
    "PruneResult": "verbs",
    "build_cache": "verbs",
    "cache_summary": "verbs",
    "check_cache": "verbs",
    "clear_cache": "verbs",
    "parse_age": "verbs",
    "prune_cache": "verbs",
}

if TYPE_CHECKING:
    from dlm.cache.encoder import DEFAULT_MAX_BYTES, CachedRowEncoder, CacheRunReport
    from dlm.cache.portable import ExportResult, ImportResult, export_cache, import_cache
    from dlm.cache.verbs import (
        BuildResult,
        ClearResult,
        HealthReport,
        PruneResult,
        build_cache,
        cache_summary,
        check_cache,
        clear_cache,
        parse_age,
        prune_cache,
    )


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'dlm.cache' has no attribute {name!r}")
    return getattr(importlib.import_module(f"dlm.cache.{home}"), name)


__all__ = [
    "DEFAULT_MAX_BYTES",
    "BuildResult",
    "CacheRunReport",
    "CachedRowEncoder",
    "ClearResult",
    "ExportResult",
    "HealthReport",
    "ImportResult",
    "PruneResult",
    "build_cache",
    "cache_summary",
    "check_cache",
    "clear_cache",
    "export_cache",
    "import_cache",
    "parse_age",
    "prune_cache",
]

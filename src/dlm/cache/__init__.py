"""The tokenized-section cache: rows' token ids persisted per document store.

Public API:
- `CachedRowTokenizer` (the tokenize seam over the cache) and its `CacheRunReport`;
- library verbs behind `dlm cache ...`, each returning a result value:
  `cache_summary`, `prune_cache`, `clear_cache`, `build_cache`, `check_cache`,
  `export_cache`, `import_cache`; `parse_age` for `--older-than`.

Layout, keys, index schema, eviction and guarantees: `docs/cache.md` and the module
docstrings of `schema` (index tables, migrations), `segments` (segment files),
`index` (entry rows and their check), `statindex` (change detection), `run` and
`reader` (one tokenize call, lazy reads), `evict` (bounds), `portable` (export).
"""

from dlm.cache.portable import ExportResult, ImportResult, export_cache, import_cache
from dlm.cache.tokenizer import DEFAULT_MAX_BYTES, CachedRowTokenizer, CacheRunReport
from dlm.cache.verbs import (
    BuildResult,
    ClearResult,
    HealthReport,
    PruneResult,
    build_cache,
    cache_summary,
    check_cache,
    clear_cache,
    format_hit_rate,
    parse_age,
    prune_cache,
)

__all__ = [
    "DEFAULT_MAX_BYTES",
    "BuildResult",
    "CacheRunReport",
    "CachedRowTokenizer",
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
    "format_hit_rate",
    "import_cache",
    "parse_age",
    "prune_cache",
]

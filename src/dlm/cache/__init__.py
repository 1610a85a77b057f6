"""The tokenized-section cache: rows' token ids persisted per document store.

Public API:
- `CachedRowTokenizer` (the tokenize seam over the cache), `CacheRunReport`;
- `cache_summary`, `prune_cache`, `clear_cache`, `export_cache`, `import_cache`
  (library verbs behind `dlm cache ...`), returning result values.

Layout, keys, index schema, eviction and guarantees: `docs/cache.md` and the module
docstrings of `schema`, `segments`, `index`, `evict`, `tokenizer`.
"""

from dlm.cache.tokenizer import DEFAULT_MAX_BYTES, CachedRowTokenizer, CacheRunReport

__all__ = ["DEFAULT_MAX_BYTES", "CachedRowTokenizer", "CacheRunReport"]

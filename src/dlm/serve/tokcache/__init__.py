"""Two-level in-memory tokenizer cache for serving (see `cached.py` for the contract)."""

from dlm.serve.tokcache.cached import CachedTokenizer, CacheStores, TokenizerCacheStats
from dlm.serve.tokcache.config import (
    TokenizerCacheConfig,
    TokenizerCacheConfigError,
    config_from,
    merge_config,
    overrides_from_mapping,
)
from dlm.serve.tokcache.plan import SplitPlan, Template, plan_for
from dlm.serve.tokcache.store import Hit, LevelStats, LruStore

__all__ = [
    "CacheStores",
    "CachedTokenizer",
    "Hit",
    "LevelStats",
    "LruStore",
    "SplitPlan",
    "Template",
    "TokenizerCacheConfig",
    "TokenizerCacheConfigError",
    "TokenizerCacheStats",
    "config_from",
    "merge_config",
    "overrides_from_mapping",
    "plan_for",
]

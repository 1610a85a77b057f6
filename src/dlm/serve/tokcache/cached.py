"""`CachedTokenizer`: a Hugging Face fast tokenizer with a two-level in-memory cache.

The wrapped tokenizer is typed by the `FastTokenizer` Protocol; the façade keeps the
Hugging Face calls (`encode`, `__call__`, `len()`, and every other attribute read
from the wrapped tokenizer), so a `CachedTokenizer` goes where one is expected.

Contract: for a single `str` and `add_special_tokens` (the only options cached),
`cached.encode(text)` / `cached(text)["input_ids"]` equal the wrapped tokenizer's
result, always. Anything else (batches, pairs, truncation, tensors, offsets) is
passed to the wrapped tokenizer untouched, as is every other attribute.

- L0 maps (tokenizer_sha256, add_special_tokens, xxh3-128 of the UTF-8 text) to the
  final ids; bounded by entries and by bytes. A digest, not the text: an 8 KB prompt costs 16
  bytes of key instead of 8 KB, and a new request's text is hashed by xxh3, which is
  faster than `str.__hash__` on text that was never hashed before.
- L1 (`prefix.py`, `PrefixLevel`) maps (tokenizer_sha256, xxh3-128 of the UTF-8 prefix)
  to the ids of a prompt's prefix up to the start of an added token (`<|im_start|>`,
  `[SEP]`, ...), encoded without special tokens (`plan.py` proves why such a cut is
  exact). A lookup
  finds boundaries from the end of the prompt and hashes their prefixes deepest
  first until one is cached (the deepest few and the first few: `MAX_BOUNDARIES`),
  encodes only the rest (less the short pieces it ends with, when `pieces.py` knows
  them), then applies the post-processor's template. On a hit the deepest new
  boundary is stored too, so a conversation growing turn by turn keeps hitting; a
  miss encodes the prompt in one tokenizer call and stores the first and the deepest
  few boundaries. Bounded by bytes.
- No entry of either level may take more than 1/`MAX_ENTRY_SHARE` of the level's
  bytes: a huge prompt is still answered exactly, but its prefixes beyond that size
  are not stored and cannot evict the shared prefixes every request uses.
- A call given `max_cached_ids` whose result is longer stores nothing (a prompt the
  server refuses for length never enters a cache).
- `stats()` counts ids answered from the cache (`cached_ids`) and ids the tokenizer
  had to produce (`encoded_ids`): their ratio is the token-level reuse.

All one-time work (the split plan, its patterns, the tokenizer fingerprint, imports) is done
at construction, so a fresh cache's first call costs what later misses cost.

Keys of both levels are 128-bit digests seeded per tokenizer: a collision, about
n^2 / 2^129 for n entries, is the one way a result could be wrong, and is accepted
as for any content-addressed cache.

The fingerprint (`dlm.tokenize.fingerprint.tokenizer_sha256`) is part of every key,
so stores shared between tokenizers never hand one tokenizer another's ids.
Requests are served from the cache only while the backend has no truncation or
padding configured and special tokens are not being split; otherwise they go to
the wrapped tokenizer. The wrapped tokenizer's vocabulary and added tokens are
read once, at construction: build a new `CachedTokenizer` after changing them.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import xxhash

from dlm.serve.tokcache.config import TokenizerCacheConfig
from dlm.serve.tokcache.plan import IDENTITY, SplitPlan, plan_for
from dlm.serve.tokcache.prefix import MAX_BOUNDARIES, Backend, PrefixLevel, Put, backend_ids
from dlm.serve.tokcache.store import LevelStats, LruStore, id_typecode
from dlm.tokenize import fingerprint as tokenizer_fingerprint

_L0_KEY_BYTES = sys.getsizeof(("", True, 0)) + sys.getsizeof(1 << 127)

MAX_ENTRY_SHARE = 8
"""No cache entry is larger than 1/MAX_ENTRY_SHARE of its level's byte bound."""

_PLANS: dict[str, tuple[SplitPlan, int]] = {}
_PLANS_LOCK = threading.Lock()


def _plan(tokenizer_sha256: str, backend: Backend) -> tuple[SplitPlan, int]:
    """(split plan, largest id) of a tokenizer, computed once per tokenizer fingerprint and
    process: reading a 150,000-token vocabulary's JSON costs about a second, and the
    fingerprint names every input of the plan."""
    with _PLANS_LOCK:
        known = _PLANS.get(tokenizer_sha256)
    if known is None:
        largest_id = max(backend.get_vocab(with_added_tokens=True).values(), default=0)
        known = (plan_for(backend.to_str()), largest_id)
        with _PLANS_LOCK:
            if len(_PLANS) >= 64:
                _PLANS.pop(next(iter(_PLANS)))
            _PLANS[tokenizer_sha256] = known
    return known


class FastTokenizer(Protocol):
    """The Hugging Face fast tokenizer a `CachedTokenizer` wraps (`PreTrainedTokenizerFast`)."""

    backend_tokenizer: Backend
    model_input_names: list[str]

    def encode(self, text: Any, *args: Any, add_special_tokens: bool = True, **kwargs: Any) -> list[int]: ...

    def __call__(self, text: Any, *args: Any, add_special_tokens: bool = True, **kwargs: Any) -> Any: ...

    def __len__(self) -> int: ...


__all__ = ["MAX_BOUNDARIES", "CacheStores", "CachedTokenizer", "FastTokenizer", "TokenizerCacheStats"]


@dataclass(frozen=True)
class CacheStores:
    """The stores of both levels; pass one instance to several `CachedTokenizer`s to share."""

    l0: LruStore | None
    l1: LruStore | None
    typecode: str

    @classmethod
    def from_config(cls, config: TokenizerCacheConfig, typecode: str) -> CacheStores:
        """Stores sized by `config` (a level that is off gets None); `typecode`: "H" or "I"
        (`id_typecode`), which must hold every id of every tokenizer sharing them."""
        return cls(
            l0=(
                LruStore(
                    typecode,
                    max_entries=config.l0_max_entries,
                    max_bytes=config.l0_max_memory,
                    max_entry_bytes=config.l0_max_memory // MAX_ENTRY_SHARE,
                )
                if config.enable_l0
                else None
            ),
            l1=(
                LruStore(
                    typecode,
                    max_bytes=config.l1_max_memory,
                    max_entry_bytes=config.l1_max_memory // MAX_ENTRY_SHARE,
                )
                if config.enable_l1
                else None
            ),
            typecode=typecode,
        )


@dataclass(frozen=True)
class TokenizerCacheStats:
    """A snapshot of the cache.

    Attributes:
        l0 / l1: per-level counters (None when the level is off or refused).
        bypassed: encode calls that went to the wrapped tokenizer (uncacheable options,
            backend truncation/padding, split special tokens).
        l1_refused: why L1 is off for this tokenizer although enabled; "" otherwise.
        cached_ids: ids of encode results taken from either level (L0 hits, L1 prefixes).
        encoded_ids: ids of encode results the tokenizer produced (misses, the rest
            beyond an L1 prefix, bypassed calls).
    """

    l0: LevelStats | None
    l1: LevelStats | None
    bypassed: int
    l1_refused: str
    cached_ids: int = 0
    encoded_ids: int = 0

    @property
    def reuse_ratio(self) -> float:
        """cached_ids / (cached_ids + encoded_ids); 0.0 before any encode."""
        total = self.cached_ids + self.encoded_ids
        return self.cached_ids / total if total else 0.0


class CachedTokenizer:
    """Wrap `tokenizer` (a `PreTrainedTokenizerFast`-like object with `backend_tokenizer`).

    Args:
        tokenizer: the fast tokenizer; every attribute not defined here is read from it.
        config: which levels are on and their sizes (a validated pydantic model; default:
            both levels off).
        stores: shared stores; default: fresh ones sized by `config`.
        tokenizer_sha256: the tokenizer's fingerprint (`dlm.tokenize.fingerprint`), when already known.
    """

    def __init__(
        self,
        tokenizer: FastTokenizer,
        config: TokenizerCacheConfig | None = None,
        *,
        stores: CacheStores | None = None,
        tokenizer_sha256: str | None = None,
    ):
        config = config or TokenizerCacheConfig()
        backend = tokenizer.backend_tokenizer
        self._tok = tokenizer
        self._backend = backend
        self.config = config
        self.tokenizer_sha256 = tokenizer_sha256 or tokenizer_fingerprint.tokenizer_sha256(tokenizer)
        self.plan, largest_id = _plan(self.tokenizer_sha256, backend)
        if stores is None:
            stores = CacheStores.from_config(config, id_typecode(largest_id + 1))
        self.typecode = stores.typecode
        deterministic = self.plan.deterministic
        self._l0 = stores.l0 if config.enable_l0 and deterministic else None
        self._wraps = self.plan.template != IDENTITY
        self._seed = int(self.tokenizer_sha256.split(":", 1)[1][:16], 16)
        l1 = stores.l1 if config.enable_l1 and self.plan.l1_ok else None
        self.prefix = (
            None
            if l1 is None
            else PrefixLevel(l1, self.plan, backend, self.tokenizer_sha256, self._seed, self.typecode)
        )
        self._bypassed = 0
        self._cached_ids = 0
        self._encoded_ids = 0
        self._count_lock = threading.Lock()
        from transformers import BatchEncoding

        self._batch_encoding = BatchEncoding
        self._warm_up()

    def _warm_up(self) -> None:
        """Pay every lazy first-call cost now: the backend's first encode and the
        regexes' first match (neither touches a store)."""
        probe = "warm up <|x|> 12\n"
        self._backend.encode(probe, add_special_tokens=True)
        self._ids_of(probe, True)
        data = probe.encode()
        self.plan.match_starts(data)
        if self.plan.match_lead:
            list(self.plan.match_starts_reversed(data))
        if self.plan.bypass_re is not None:
            self.plan.bypass_re.search(data)
        xxhash.xxh3_128_intdigest(data, seed=self._seed)
        xxhash.xxh3_128(seed=self._seed).intdigest()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tok, name)

    def __len__(self) -> int:
        return len(self._tok)

    @property
    def tokenizer(self) -> FastTokenizer:
        """The wrapped tokenizer."""
        return self._tok

    @property
    def enabled(self) -> bool:
        """True when at least one level is in use for this tokenizer."""
        return self._l0 is not None or self.prefix is not None

    def encode(
        self,
        text: Any,
        *args: Any,
        add_special_tokens: bool = True,
        max_cached_ids: int | None = None,
        **kwargs: Any,
    ) -> list[int]:
        """Ids of one text, list[int] [n_tokens], as `tokenizer.encode(text, add_special_tokens=...)`.

        `max_cached_ids`: a result with more ids is returned but nothing of this call
        is stored (a prompt too long to serve). Other arguments (a text pair,
        truncation, ...) are passed to the wrapped tokenizer.
        """
        if args or kwargs or not self._cacheable(text):
            ids = self._tok.encode(text, *args, add_special_tokens=add_special_tokens, **kwargs)
            self._count_bypass(len(ids))
            return ids
        return self._ids(text, bool(add_special_tokens), max_cached_ids)

    def warm(self, text: str) -> int:
        """Store the L1 prefixes of `text` (a rendered prompt; no special tokens added)
        ending where its added tokens start (the first and deepest few, as a miss
        would), so the first request sharing them hits.
        Counts no lookup. Returns the number of prefixes stored (0 when L1 is off for
        this tokenizer or `text` has no boundary)."""
        if self.prefix is None or not self._cacheable(text):
            return 0
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            return 0
        return self.prefix.warm(data)

    def __call__(self, text: Any, *args: Any, add_special_tokens: bool = True, **kwargs: Any) -> Any:
        """A `BatchEncoding` for one text, as the wrapped tokenizer's `__call__`.

        From the cache: `input_ids`, plus `token_type_ids` / `attention_mask` when the
        tokenizer's `model_input_names` ask for them; `.encodings` is None.
        """
        if args or kwargs or not self._cacheable(text):
            self._count_bypass(0)
            return self._tok(text, *args, add_special_tokens=add_special_tokens, **kwargs)
        ids = self._ids(text, bool(add_special_tokens), None)
        data: dict[str, list[int]] = {"input_ids": ids}
        names = self._tok.model_input_names
        if "token_type_ids" in names:
            data["token_type_ids"] = self._type_ids(len(ids), bool(add_special_tokens))
        if "attention_mask" in names:
            data["attention_mask"] = [1] * len(ids)
        return self._batch_encoding(data)

    def stats(self) -> TokenizerCacheStats:
        """Counters of both levels (see `TokenizerCacheStats`)."""
        refused = "" if self.plan.l1_ok or not self.config.enable_l1 else self.plan.reason
        return TokenizerCacheStats(
            l0=self._l0.stats() if self._l0 is not None else None,
            l1=self.prefix.store.stats() if self.prefix is not None else None,
            bypassed=self._bypassed,
            l1_refused=refused,
            cached_ids=self._cached_ids,
            encoded_ids=self._encoded_ids,
        )

    def clear(self) -> None:
        """Empty both levels and reset their counters."""
        if self._l0 is not None:
            self._l0.clear()
        if self.prefix is not None:
            self.prefix.clear()
        self._bypassed = self._cached_ids = self._encoded_ids = 0

    def _count_bypass(self, n_ids: int) -> None:
        with self._count_lock:
            self._bypassed += 1
            self._encoded_ids += n_ids

    def _count(self, cached: int, encoded: int) -> None:
        with self._count_lock:
            self._cached_ids += cached
            self._encoded_ids += encoded

    def _cacheable(self, text: Any) -> bool:
        backend = self._backend
        return (
            self.enabled
            and type(text) is str
            and backend.truncation is None
            and backend.padding is None
            and not backend.encode_special_tokens
            and not getattr(self._tok, "split_special_tokens", False)
        )

    def _ids(self, text: str, add_special: bool, max_cached_ids: int | None) -> list[int]:
        try:
            data = text.encode("utf-8")
            splittable = True
        except UnicodeEncodeError:  # lone surrogates: hashable, but let the tokenizer split
            data = text.encode("utf-8", "surrogatepass")
            splittable = False
        l0 = self._l0
        if l0 is not None:
            key = (self.tokenizer_sha256, add_special, xxhash.xxh3_128_intdigest(data, seed=self._seed))
            found = l0.get(key)
            if found is not None:
                ids = found.tolist()
                self._count(len(ids), 0)
                return ids
        parts = None
        pending: list[Put] = []
        prefix_level = self.prefix
        if prefix_level is not None and splittable and len(text) >= self.config.l1_min_prompt_chars:
            parts = prefix_level.lookup(data, pending)
        if parts is None:
            # a text with lone surrogates goes through `encode`, whose refusal callers know
            ids = (
                self._ids_of(text, add_special)
                if splittable
                else self._backend.encode(text, add_special_tokens=add_special).ids
            )
            self._count(0, len(ids))
            if l0 is not None and (max_cached_ids is None or len(ids) <= max_cached_ids):
                l0.put(key, ids, _L0_KEY_BYTES)
            return ids
        prefix, rest, ids, n_cached = parts
        pre: tuple[int, ...] = ()
        post: tuple[int, ...] = ()
        if add_special and self._wraps:
            pre, post = self.plan.template.pre_ids, self.plan.template.post_ids
        self._count(n_cached, len(ids) - n_cached)
        if max_cached_ids is not None and len(ids) + len(pre) + len(post) > max_cached_ids:
            pending.clear()
        else:
            if prefix_level is not None:
                prefix_level.commit(pending)
            if l0 is not None:
                packed = prefix + self._pack(rest) if rest else prefix  # entries are never changed
                if pre or post:
                    packed = self._pack(pre) + packed + self._pack(post)
                l0.put(key, packed, _L0_KEY_BYTES)
        if pre:
            ids[:0] = pre
        ids += post
        return ids

    def _type_ids(self, n_ids: int, add_special: bool) -> list[int]:
        template = self.plan.template
        if not add_special:
            return [0] * n_ids
        n_seq = n_ids - len(template.pre_ids) - len(template.post_ids)
        return [*template.pre_types, *[template.seq_type] * n_seq, *template.post_types]

    def _ids_of(self, text: str, add_special: bool) -> list[int]:
        return backend_ids(self._backend, text, add_special)

    def _pack(self, ids: Iterable[int]) -> array:
        return array(self.typecode, ids)

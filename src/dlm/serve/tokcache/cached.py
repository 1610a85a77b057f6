"""`CachedTokenizer`: a Hugging Face fast tokenizer with a two-level in-memory cache.

Contract: for a single `str` and `add_special_tokens` (the only options cached),
`cached.encode(text)` / `cached(text)["input_ids"]` equal the wrapped tokenizer's
result, always. Anything else (batches, pairs, truncation, tensors, offsets) is
passed to the wrapped tokenizer untouched, as is every other attribute.

- L0 maps (fingerprint, add_special_tokens, xxh3-128 of the UTF-8 text) to the
  final ids; bounded by entries and by bytes. A digest, not the text: an 8 KB prompt costs 16
  bytes of key instead of 8 KB, and a new request's text is hashed by xxh3 (~0.3 µs)
  instead of `str.__hash__` (~3 µs).
- L1 maps (fingerprint, xxh3-128 of the UTF-8 prefix) to the ids of a prompt's
  prefix up to the start of an added token (`<|im_start|>`, `[SEP]`, ...), encoded
  without special tokens (`plan.py` proves why such a cut is exact). A lookup
  finds boundaries from the end of the prompt and hashes their prefixes deepest
  first until one is cached, encodes only the rest (less the short pieces it ends
  with, when `pieces.py` knows them), then applies the post-processor's template.
  On a hit the deepest new boundary is stored too, so a conversation growing turn
  by turn keeps hitting; on a miss every boundary is stored (at most
  `MAX_BOUNDARIES`). Bounded by bytes.
- No entry of either level may take more than 1/`MAX_ENTRY_SHARE` of the level's
  bytes: a huge prompt is still answered exactly, but its prefixes beyond that size
  are not stored and cannot evict the shared prefixes every request uses.
- A call given `max_cached_ids` whose result is longer stores nothing (a prompt the
  server refuses for length never enters a cache).
- `stats()` counts ids answered from the cache (`cached_ids`) and ids the tokenizer
  had to produce (`encoded_ids`): their ratio is the token-level reuse.

All one-time work (the split plan, its patterns, the fingerprint, imports) is done
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
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import xxhash

from dlm.serve.tokcache.config import TokenizerCacheConfig
from dlm.serve.tokcache.plan import IDENTITY, SplitPlan, plan_for
from dlm.serve.tokcache.pieces import PieceCache
from dlm.serve.tokcache.store import LevelStats, LruStore, id_typecode
from dlm.tokenize.fingerprint import tokenizer_sha256

_L1_KEY_BYTES = sys.getsizeof(("", 0)) + sys.getsizeof(1 << 127)
_L0_KEY_BYTES = sys.getsizeof(("", True, 0)) + sys.getsizeof(1 << 127)

HOT_SHARE = 4
"""L1 keeps hot tuples (see store.py) in at most 1/HOT_SHARE of its byte bound."""

MAX_ENTRY_SHARE = 8
"""No cache entry is larger than 1/MAX_ENTRY_SHARE of its level's byte bound."""

L0_MAX_HOT_BYTES = 8 * 2**20
"""L0, bounded by entries rather than bytes, keeps hot tuples in at most this many
bytes (about 230,000 Qwen3 ids: exact repeats such as canned prompts)."""

_Put = tuple[Any, array, bool, tuple[int, ...] | None, Any]
"""An L1 entry to store: (key, ids, grown, hot tuple, key whose hot tuple to drop)."""

MAX_BOUNDARIES = 64
"""Split points considered per prompt (the first and last halves when there are more):
bounds the work and memory a prompt full of special tokens can cause."""


_PLANS: dict[str, tuple[SplitPlan, int]] = {}
_PLANS_LOCK = threading.Lock()


def _plan(fingerprint: str, backend: Any) -> tuple[SplitPlan, int]:
    """(split plan, largest id) of a tokenizer, computed once per fingerprint and
    process: reading a 150,000-token vocabulary's JSON costs about a second, and the
    fingerprint names every input of the plan."""
    with _PLANS_LOCK:
        known = _PLANS.get(fingerprint)
    if known is None:
        largest_id = max(backend.get_vocab(with_added_tokens=True).values(), default=0)
        known = (plan_for(backend.to_str()), largest_id)
        with _PLANS_LOCK:
            if len(_PLANS) >= 64:
                _PLANS.pop(next(iter(_PLANS)))
            _PLANS[fingerprint] = known
    return known


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
                    max_hot_bytes=min(L0_MAX_HOT_BYTES, config.l0_max_memory // HOT_SHARE),
                    max_entry_bytes=config.l0_max_memory // MAX_ENTRY_SHARE,
                )
                if config.enable_l0
                else None
            ),
            l1=(
                LruStore(
                    typecode,
                    max_bytes=config.l1_max_memory,
                    max_hot_bytes=config.l1_max_memory // HOT_SHARE,
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
        fingerprint: the tokenizer's `tokenizer_sha256`, when already known.
    """

    def __init__(
        self,
        tokenizer: Any,
        config: TokenizerCacheConfig | None = None,
        *,
        stores: CacheStores | None = None,
        fingerprint: str | None = None,
    ):
        config = config or TokenizerCacheConfig()
        backend = tokenizer.backend_tokenizer
        self._tok = tokenizer
        self._backend = backend
        self.config = config
        self.fingerprint = fingerprint or tokenizer_sha256(tokenizer)
        self.plan, largest_id = _plan(self.fingerprint, backend)
        if stores is None:
            stores = CacheStores.from_config(config, id_typecode(largest_id + 1))
        self.typecode = stores.typecode
        deterministic = self.plan.deterministic
        self._l0 = stores.l0 if config.enable_l0 and deterministic else None
        self._l1 = stores.l1 if config.enable_l1 and self.plan.l1_ok else None
        self._wraps = self.plan.template != IDENTITY
        self._seed = int(self.fingerprint.split(":", 1)[1][:16], 16)
        self._bypassed = 0
        self._cached_ids = 0
        self._encoded_ids = 0
        self._count_lock = threading.Lock()
        from transformers import BatchEncoding

        self._batch_encoding = BatchEncoding
        self._pieces = PieceCache()
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
    def tokenizer(self) -> Any:
        """The wrapped tokenizer."""
        return self._tok

    @property
    def enabled(self) -> bool:
        """True when at least one level is in use for this tokenizer."""
        return self._l0 is not None or self._l1 is not None

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
        ending where its added tokens start, so the first request sharing them hits.
        Counts no lookup. Returns the number of prefixes stored (0 when L1 is off for
        this tokenizer or `text` has no boundary)."""
        if self._l1 is None or not self._cacheable(text):
            return 0
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            return 0
        plan = self.plan
        if plan.bypass_re is not None and plan.bypass_re.search(data):
            return 0
        starts = self._boundaries(data)
        pending: list[_Put] = []
        self._encode_storing_all(data, starts, self._prefix_keys(data, starts), pending)
        self._commit(pending)
        return len(pending)

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
            l1=self._l1.stats() if self._l1 is not None else None,
            bypassed=self._bypassed,
            l1_refused=refused,
            cached_ids=self._cached_ids,
            encoded_ids=self._encoded_ids,
        )

    def clear(self) -> None:
        """Empty both levels and reset their counters."""
        for store in (self._l0, self._l1):
            if store is not None:
                store.clear()
        self._pieces.clear()
        self._bypassed = self._cached_ids = self._encoded_ids = 0

    def _count_bypass(self, n_ids: int) -> None:
        with self._count_lock:
            self._bypassed += 1
            self._encoded_ids += n_ids

    def _count(self, cached: int, encoded: int) -> None:
        with self._count_lock:
            self._cached_ids += cached
            self._encoded_ids += encoded

    def _commit(self, pending: list[_Put]) -> None:
        l1: LruStore = self._l1  # type: ignore[assignment]
        for key, ids, grown, hot, drop in pending:
            l1.put(key, ids, _L1_KEY_BYTES, grown=grown, hot=hot)
            if drop is not None:
                l1.drop_hot(drop)

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
            key = (self.fingerprint, add_special, xxhash.xxh3_128_intdigest(data, seed=self._seed))
            found = l0.get(key)
            if found is not None:
                ids = found.tolist()
                self._count(len(ids), 0)
                return ids
        parts = None
        pending: list[_Put] = []
        if self._l1 is not None and splittable and len(text) >= self.config.l1_min_prompt_chars:
            parts = self._l1_ids(data, pending)
        if parts is None:
            # a text with lone surrogates goes through `encode`, whose refusal callers know
            ids = self._ids_of(text, add_special) if splittable else self._backend.encode(
                text, add_special_tokens=add_special).ids
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
            self._commit(pending)
            if l0 is not None:
                packed = prefix + self._pack(rest)
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


    def _l1_ids(self, data: bytes, pending: list[_Put]) -> tuple[array, list[int], list[int], int] | None:
        """Ids without special tokens of the UTF-8 text `data` via the prefix cache, as
        (prefix ids, ids of the rest, all ids as a fresh list, how many came from the
        cache), or None to
        encode plainly. The entries to store are appended to `pending` (the caller
        stores them, or not when the prompt is refused)."""
        plan = self.plan
        if plan.bypass_re is not None and plan.bypass_re.search(data):
            return None
        l1: LruStore = self._l1  # type: ignore[assignment]  # callers check L1 is enabled first
        seen: list[int] = []
        keys: list[tuple[str, int]] = []
        found_at, prefix = l1.deepest(self._probe_keys(data, self._probe_starts(data), seen, keys))
        if not seen:  # no boundary
            return None
        if prefix is None:
            forward = self._boundaries(data)
            packed = self._encode_storing_all(data, forward, self._prefix_keys(data, forward), pending)
            return packed, [], packed.tolist(), 0
        ids = prefix.tolist()
        deepest = seen[0]
        if found_at == 0:
            rest = self._encode_piece(data[deepest:])
            ids += rest
            return prefix.ids, rest, ids, len(prefix.ids)
        # One encode of the rest, less the known short pieces it ends with (the chat
        # template's closing turn); boundaries split the ids exactly, so the deepest
        # one gives the new prefix, stored for the next turn.
        begin = seen[found_at]
        end, tail, last = self._pieces.peel(data, seen[:found_at])
        if end > deepest:  # the final piece is encoded: split there (offsets needed), learn the tail
            encoding = self._backend.encode(data[begin:end].decode("utf-8"), add_special_tokens=False)
            rest = encoding.ids
            cut = encoding.char_to_token(len(data[begin:deepest].decode("utf-8")))
            self._pieces.learn(data, begin, encoding, rest, seen[:found_at])
        else:
            rest = self._ids_of(data[begin:end].decode("utf-8"), False)
            cut = len(rest) + len(tail) - last
        rest += tail
        n_prefix = len(ids)
        ids += rest
        if cut is not None:  # None is not expected: then do not store, the result is still exact
            # A prefix that was itself stored this way means a conversation is growing
            # turn by turn: its next turn will find the new prefix, so keep it hot now,
            # from the ints at hand, and let the turn just found go cold. A prompt
            # extending a shared prefix once (a new user turn after a common system
            # prompt) does not pay for a tuple never read.
            hot = tuple(ids[: n_prefix + cut]) if prefix.grown else None
            drop = keys[found_at] if hot is not None else None
            pending.append((keys[0], prefix.ids + self._pack(rest[:cut]), True, hot, drop))
        return prefix.ids, rest, ids, n_prefix

    def _encode_storing_all(
        self, data: bytes, starts: list[int], keys: list[Any], pending: list[_Put]
    ) -> array:
        """Ids (no special tokens) of `data`, queuing each boundary's prefix in `pending`
        while it fits one entry's share of L1; past that, the rest in one encode (the
        boundaries split the ids exactly, so one encode equals the pieces joined)."""
        l1: LruStore = self._l1  # type: ignore[assignment]  # callers check L1 is enabled first
        packed = self._pack(())
        begin = 0
        for end, key in zip(starts, keys, strict=True):
            packed = packed + self._pack(self._encode_piece(data[begin:end]))
            if not l1.fits(packed, _L1_KEY_BYTES):
                rest = data[end:].decode("utf-8")
                return packed + self._pack(self._ids_of(rest, False))
            pending.append((key, packed, False, None, None))
            begin = end
        return packed + self._pack(self._encode_piece(data[begin:]))

    def _pack(self, ids: Any) -> array:
        return array(self.typecode, ids)

    def _boundaries(self, data: bytes) -> list[int]:
        """Byte offsets (> 0) where a stage-1 added-token match starts (see plan.py)."""
        starts = self.plan.match_starts(data)
        if starts and starts[0] == 0:
            starts.pop(0)
        if len(starts) > MAX_BOUNDARIES:
            half = MAX_BOUNDARIES // 2
            starts = starts[:half] + starts[-half:]
        return starts

    def _probe_starts(self, data: bytes) -> Iterator[int]:
        """The boundaries of `_boundaries(data)`, deepest first, found lazily: with a
        `match_lead`, the last half by scanning back from the end (a hit is usually
        among the deepest few, even in a prompt with hundreds of boundaries), and the
        first half only if needed."""
        lowest = len(data) + 1
        if self.plan.match_lead:
            found = 0
            for start in self.plan.match_starts_reversed(data):
                if start == 0:
                    return
                if found == MAX_BOUNDARIES // 2:
                    break
                yield start
                found += 1
                lowest = start
            else:
                return
        for start in reversed(self._boundaries(data)):
            if start < lowest:
                yield start

    def _probe_keys(
        self, data: bytes, starts: Iterator[int], seen: list[int], keys: list[tuple[str, int]]
    ) -> Iterator[tuple[str, int]]:
        """(fingerprint, xxh3-128 of data[:b]) for each b of `starts`, hashed only when
        probed; each b and key is appended to `seen` and `keys`."""
        view = memoryview(data)
        fingerprint, seed = self.fingerprint, self._seed
        for start in starts:
            key = (fingerprint, xxhash.xxh3_128_intdigest(view[:start], seed=seed))
            seen.append(start)
            keys.append(key)
            yield key

    def _prefix_keys(self, data: bytes, starts: list[int]) -> list[tuple[str, int]]:
        """(fingerprint, xxh3-128 of data[:b]) for each b, in one streaming pass."""
        hasher = xxhash.xxh3_128(seed=self._seed)
        view = memoryview(data)
        keys = []
        begin = 0
        fingerprint = self.fingerprint
        for end in starts:
            hasher.update(view[begin:end])
            keys.append((fingerprint, hasher.intdigest()))
            begin = end
        return keys

    def _encode_piece(self, piece: bytes) -> list[int]:
        """Ids of text between boundaries (no special tokens added), known ones from the
        piece cache."""
        if not piece:
            return []
        known = self._pieces.get(piece)
        if known is not None:
            return list(known)
        ids = self._ids_of(piece.decode("utf-8"), False)
        self._pieces.put(piece, ids)
        return ids

    def _ids_of(self, text: str, add_special: bool) -> list[int]:
        """The backend's ids of `text`, without character offsets: `encode_batch_fast`
        on a batch of one gives the same ids as `encode` and skips building offsets,
        about a quarter of the cost of a short piece (`benchmarks/tokenizer_cache.py`)."""
        return self._backend.encode_batch_fast([text], add_special_tokens=add_special)[0].ids

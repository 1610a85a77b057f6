"""The tokenizer cache's memory bounds, token-level counters and warm start, with the
real SmolLM2 and Qwen3 tokenizers (every result checked against the plain tokenizer)."""

from __future__ import annotations

from typing import Any

from dlm.serve.tokcache import CachedTokenizer, LruStore, TokenizerCacheConfig
from dlm.serve.tokcache.cached import MAX_ENTRY_SHARE
from dlm.serve.warm import prefill


def chat(tok: Any, turns: list[str], system: str = "You are helpful.") -> str:
    messages = [{"role": "system", "content": system}]
    messages += [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(turns)]
    return str(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True))


def test_l0_is_bounded_by_bytes_as_well_as_entries(smollm2_tokenizer: Any) -> None:
    limit = 60_000  # ~6 KB per entry: room for 9, and one entry is within its 1/8 share
    cached = CachedTokenizer(
        smollm2_tokenizer, TokenizerCacheConfig(enable_l0=True, l0_max_entries=10_000, l0_max_memory=limit)
    )
    for i in range(12):
        text = f"document {i}: " + "lorem ipsum dolor sit amet " * 300  # ~3,000 uint16 ids each
        assert cached.encode(text) == smollm2_tokenizer.encode(text)
    l0 = cached.stats().l0
    assert 0 < l0.bytes <= limit
    assert 0 < l0.entries < 12  # the entry bound (10,000) was not what limited it


def test_no_l1_entry_takes_more_than_its_share_and_shared_prefixes_survive(qwen3_tok: Any) -> None:
    limit = 400_000
    config = TokenizerCacheConfig(enable_l1=True, l1_max_memory=limit, l1_min_prompt_chars=0)
    cached = CachedTokenizer(qwen3_tok, config)
    system = "Policy: " + "be kind and precise. " * 40
    shared = [chat(qwen3_tok, [f"question {i}"], system) for i in range(5)]
    for text in shared:
        cached.encode(text, add_special_tokens=False)
    before = cached.stats().l1
    # a huge prompt with added tokens near its end: each of its prefixes is ~60,000 ids
    huge = "x " * 60_000 + "<|im_start|>a<|im_end|>" * 40
    assert cached.encode(huge, add_special_tokens=False) == qwen3_tok.encode(huge, add_special_tokens=False)
    after = cached.stats().l1
    assert after.entries == before.entries and after.bytes == before.bytes  # nothing of it stored
    probe = chat(qwen3_tok, ["question 99"], system)
    assert cached.encode(probe, add_special_tokens=False) == qwen3_tok.encode(probe, add_special_tokens=False)
    assert cached.stats().l1.hits == before.hits + 1  # the shared system prompt still hits


def test_a_store_refuses_an_entry_over_its_share() -> None:
    store = LruStore("H", max_bytes=80_000, max_entry_bytes=80_000 // MAX_ENTRY_SHARE)
    store.put("small", list(range(1000)))
    store.put("large", list(range(6000)))
    assert store.get("small") is not None and store.get("large") is None
    assert store.fits(store.get("small").ids) and not store.stats().entries == 2


def test_a_prompt_refused_for_length_stores_nothing(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(
        smollm2_tokenizer, TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)
    )
    text = chat(smollm2_tokenizer, ["tell me everything " * 50])
    n_ids = len(smollm2_tokenizer.encode(text, add_special_tokens=False))
    ids = cached.encode(text, add_special_tokens=False, max_cached_ids=n_ids - 1)
    assert ids == smollm2_tokenizer.encode(text, add_special_tokens=False)
    stats = cached.stats()
    assert stats.l0.entries == 0 and stats.l1.entries == 0
    cached.encode(text, add_special_tokens=False, max_cached_ids=n_ids)  # fits: stored
    stats = cached.stats()
    assert stats.l0.entries == 1 and stats.l1.entries > 0


def test_token_counters_give_the_reuse_ratio(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, TokenizerCacheConfig(enable_l1=True, l1_min_prompt_chars=0))
    first = chat(smollm2_tokenizer, ["first question"], "A long shared system prompt. " * 20)
    second = chat(smollm2_tokenizer, ["second question"], "A long shared system prompt. " * 20)
    n_first = len(cached.encode(first, add_special_tokens=False))
    stats = cached.stats()
    assert (stats.cached_ids, stats.encoded_ids) == (0, n_first)
    n_second = len(cached.encode(second, add_special_tokens=False))
    prefix = second[: second.index("<|im_start|>user")]
    n_prefix = len(smollm2_tokenizer.encode(prefix, add_special_tokens=False))
    stats = cached.stats()
    assert stats.cached_ids == n_prefix
    assert stats.encoded_ids == n_first + n_second - n_prefix
    assert stats.reuse_ratio == n_prefix / (n_first + n_second)


def test_prefill_makes_the_first_request_hit(smollm2_tokenizer: Any) -> None:
    system = "You answer questions about the project's notes. " * 10
    cached = CachedTokenizer(smollm2_tokenizer, TokenizerCacheConfig(enable_l1=True, l1_min_prompt_chars=0))
    shots = [("What is dlm?", "A document language model tool.")]
    assert prefill(cached, smollm2_tokenizer, system, shots) > 0
    assert cached.stats().l1.hits == cached.stats().l1.misses == 0  # warming counts no lookup
    text = chat(smollm2_tokenizer, [shots[0][0], shots[0][1], "And what is a section?"], system)
    assert cached.encode(text, add_special_tokens=False) == smollm2_tokenizer.encode(text, add_special_tokens=False)
    l1 = cached.stats().l1
    assert (l1.hits, l1.misses) == (1, 0)
    shots_end = text.index("<|im_start|>user\nAnd what")
    assert cached.stats().cached_ids == len(smollm2_tokenizer.encode(text[:shots_end], add_special_tokens=False))


def test_prefill_without_a_system_prompt_warms_the_templates_default(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, TokenizerCacheConfig(enable_l1=True, l1_min_prompt_chars=0))
    prefill(cached, smollm2_tokenizer, None)
    text = smollm2_tokenizer.apply_chat_template(
        [{"role": "user", "content": "hello"}], tokenize=False, add_generation_prompt=True
    )
    assert cached.encode(text, add_special_tokens=False) == smollm2_tokenizer.encode(text, add_special_tokens=False)
    assert cached.stats().l1.hits == 1

"""CachedTokenizer: configuration, levels, stats, isolation, concurrency and the traps
that make naive prefix splitting wrong (shown to be real, then shown handled)."""

from __future__ import annotations

import sys
import threading
from array import array
from typing import Any

import pytest
from serve_tokenizers import metaspace_tokenizer

from dlm.errors import DlmError
from dlm.serve.tokcache import (
    CachedTokenizer,
    CacheStores,
    LevelStats,
    LruStore,
    TokenizerCacheConfig,
    TokenizerCacheConfigError,
    config_from,
    merge_config,
)
from dlm.serve.tokcache.cached import MAX_BOUNDARIES
from dlm.serve.tokcache.pieces import PieceCache

BOTH = TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)
SYSTEM = "You are a careful assistant for ACME. Follow the policy below. " * 8


def chat(tok: Any, turns: list[str]) -> str:
    messages = [{"role": "system", "content": SYSTEM}]
    for i, turn in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": turn})
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


# -- configuration -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"enable_l0": True, "l0_max_entries": 0}, "l0_max_entries"),
        ({"enable_l1": True, "l1_max_memory": -1}, "l1_max_memory"),
        ({"l1_min_prompt_chars": -5}, "l1_min_prompt_chars"),
        ({"enable_l0": "yes"}, "enable_l0"),
        ({"l0_max_entries": True}, "l0_max_entries"),
    ],
)
def test_invalid_config_raises_a_dlm_error_naming_the_field(bad: dict[str, Any], field: str) -> None:
    with pytest.raises(TokenizerCacheConfigError) as info:
        config_from(bad)
    assert isinstance(info.value, DlmError)
    assert f"{field}: must be" in str(info.value)


def test_merge_applies_flags_over_file_over_frontmatter_and_names_the_source() -> None:
    config = merge_config(
        ("frontmatter", {"enable_l0": True, "l0_max_entries": 5, "l1_max_memory": 1000}),
        ("config.json", {"l0_max_entries": 7, "enable_l1": True}),
        ("flags", {"l0_max_entries": 9, "l1_max_memory": None}),
    )
    assert config == TokenizerCacheConfig(enable_l0=True, l0_max_entries=9, enable_l1=True, l1_max_memory=1000)
    with pytest.raises(TokenizerCacheConfigError, match="config.json: l1_max_memory"):
        merge_config(("frontmatter", {}), ("config.json", {"l1_max_memory": 0}))
    with pytest.raises(TokenizerCacheConfigError, match="unknown tokenizer_cache key"):
        merge_config(("config.json", {"l2": True}))


def test_both_levels_off_by_default_use_the_plain_tokenizer(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer)
    assert not cached.enabled
    text = chat(smollm2_tokenizer, ["hi"])
    assert cached.encode(text) == smollm2_tokenizer.encode(text)
    stats = cached.stats()
    assert stats.l0 is None and stats.l1 is None and stats.bypassed == 1


def test_getattr_delegates_to_the_wrapped_tokenizer(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, BOTH)
    assert cached.eos_token == smollm2_tokenizer.eos_token
    assert cached.decode(cached.encode("hello world")) == "hello world"
    assert len(cached) == len(smollm2_tokenizer)


# -- levels and stats ---------------------------------------------------------------


def test_l0_hits_exact_repeats_and_is_bounded_by_entries(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, TokenizerCacheConfig(enable_l0=True, l0_max_entries=3))
    texts = [f"prompt number {i}" for i in range(5)]
    for text in texts + texts[-2:]:
        assert cached.encode(text) == smollm2_tokenizer.encode(text)
    stats = cached.stats().l0
    assert (stats.hits, stats.misses, stats.entries) == (2, 5, 3)
    assert stats.hit_rate == pytest.approx(2 / 7)


def test_growing_conversation_keeps_hitting_l1(qwen3_tok: Any) -> None:
    cached = CachedTokenizer(qwen3_tok, TokenizerCacheConfig(enable_l1=True, l1_min_prompt_chars=0))
    turns: list[str] = []
    for i in range(12):
        turns += [f"question {i}: what about item {i * 7}?"] + ([f"answer {i}"] if i < 11 else [])
        text = chat(qwen3_tok, turns[: 2 * i + 1])
        assert cached.encode(text, add_special_tokens=False) == qwen3_tok.encode(text, add_special_tokens=False)
    l1 = cached.stats().l1
    assert l1.misses == 1 and l1.hits == 11
    assert cached.typecode == "I" and l1.bytes >= 4 * l1.ids


def test_shared_system_prompt_hits_for_different_user_turns(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, BOTH)
    for i in range(20):
        text = chat(smollm2_tokenizer, [f"user {i} asks something different #{i * 31}"])
        assert cached.encode(text) == smollm2_tokenizer.encode(text)
    l1 = cached.stats().l1
    assert (l1.hits, l1.misses) == (19, 1)
    assert cached.typecode == "H"  # 49,152 ids fit 2 bytes


def test_l1_is_bounded_by_bytes(smollm2_tokenizer: Any) -> None:
    limit = 6000
    cached = CachedTokenizer(
        smollm2_tokenizer, TokenizerCacheConfig(enable_l1=True, l1_max_memory=limit, l1_min_prompt_chars=0)
    )
    for i in range(40):
        text = chat(smollm2_tokenizer, [f"turn {i} " * 20, "ok", "again"])
        assert cached.encode(text) == smollm2_tokenizer.encode(text)
    l1 = cached.stats().l1
    assert 0 < l1.bytes <= limit and l1.entries > 0


def test_a_store_counts_its_bytes_and_hands_out_fresh_lists() -> None:
    store = LruStore("I", max_bytes=1 << 20)
    assert store.deepest([]) == (-1, None) and store.stats().misses == 0  # no probe, no lookup
    ids = [70_000 + i for i in range(1000)]
    store.put("k", ids, key_bytes=40)
    stats = store.stats()
    assert (stats.entries, stats.ids) == (1, 1000)
    assert stats.bytes == sys.getsizeof(array("I", ids)) + 40  # the array with its header, and the key
    got = store.get("k").tolist()  # type: ignore[union-attr]
    got[0] = -1  # a caller's list is its own
    again = store.get("k")
    assert again is not None and again.tolist() == ids
    store.put("k", [1, 2, 3])  # replacing an entry replaces its bytes and ids
    stats = store.stats()
    assert (stats.entries, stats.ids, stats.hits) == (1, 3, 2)
    assert stats.bytes == sys.getsizeof(array("I", [1, 2, 3]))
    store.clear()
    assert store.stats() == LevelStats(0, 0, 0, 0, 0)


def test_cached_results_are_fresh_lists(qwen3_tok: Any) -> None:
    cached = CachedTokenizer(qwen3_tok, BOTH)
    texts = [chat(qwen3_tok, [f"question {i}"]) for i in range(4)]
    for text in texts * 3:
        want = qwen3_tok.encode(text)
        got = cached.encode(text)
        assert got == want
        got.clear()  # must not reach into the cache
    assert cached.stats().l1.hits >= 1 and cached.stats().l0.hits >= 1
    assert [cached.encode(t) for t in texts] == [qwen3_tok.encode(t) for t in texts]


def test_a_growing_conversation_hits_on_every_turn(qwen3_tok: Any) -> None:
    """Each turn finds the prefix the previous turn stored; prompts that extend a shared
    prefix once (different user turns) find the shared system prompt."""
    cached = CachedTokenizer(qwen3_tok, BOTH)
    turns: list[str] = []
    for i in range(6):
        turns.append(f"question {i}?")
        text = chat(qwen3_tok, turns)
        assert cached.encode(text) == qwen3_tok.encode(text)
        turns.append(f"answer {i}.")
    l1 = cached.stats().l1
    assert (l1.hits, l1.misses) == (5, 1)
    turns.append("question 6?")
    text = chat(qwen3_tok, turns)
    assert cached.encode(text) == qwen3_tok.encode(text)
    assert cached.stats().l1.hits == 6
    assert cached.stats().cached_ids > 0

    fresh = CachedTokenizer(qwen3_tok, BOTH)
    for i in range(6):
        text = chat(qwen3_tok, [f"a different question {i}?"])
        assert fresh.encode(text) == qwen3_tok.encode(text)
    l1 = fresh.stats().l1
    assert (l1.hits, l1.misses) == (5, 1)  # the shared system prompt


def test_known_closing_pieces_are_not_encoded_again(qwen3_tok: Any) -> None:
    """After one prompt, `<|im_end|>\n` and `<|im_start|>assistant\n` come from the
    piece cache: the tokenizer sees only the new user turn."""
    cached = CachedTokenizer(qwen3_tok, TokenizerCacheConfig(enable_l1=True, l1_min_prompt_chars=0))
    first = chat(qwen3_tok, ["the first question"])
    assert cached.encode(first) == qwen3_tok.encode(first)
    assert cached.prefix.pieces.get(b"<|im_start|>assistant\n") == tuple(
        qwen3_tok.encode("<|im_start|>assistant\n", add_special_tokens=False)
    )
    seen: list[str] = []
    backend = cached.prefix.backend

    class Recording:
        def encode(self, text: str, **kwargs: Any) -> Any:
            seen.append(text)
            return backend.encode(text, **kwargs)

        def encode_batch_fast(self, texts: list[str], **kwargs: Any) -> Any:
            seen.extend(texts)
            return backend.encode_batch_fast(texts, **kwargs)

        def __getattr__(self, name: str) -> Any:
            return getattr(backend, name)

    cached.prefix.backend = Recording()  # type: ignore[union-attr]
    second = chat(qwen3_tok, ["a second, different question"])
    assert cached.encode(second) == qwen3_tok.encode(second)
    assert seen == ["<|im_start|>user\na second, different question"]


def test_the_piece_cache_is_bounded() -> None:
    pieces = PieceCache()
    pieces.put(b"x" * (PieceCache.MAX_PIECE_BYTES + 1), [1])
    assert len(pieces) == 0
    for i in range(PieceCache.MAX_PIECES + 10):
        pieces.put(b"<p%d>" % i, [i])
    assert len(pieces) == PieceCache.MAX_PIECES
    assert pieces.get(b"<p0>") is None and pieces.get(b"<p%d>" % (PieceCache.MAX_PIECES + 9)) == (
        PieceCache.MAX_PIECES + 9,
    )


def test_lone_surrogates_get_the_tokenizers_own_error_and_are_not_cached(qwen3_tok: Any) -> None:
    cached = CachedTokenizer(qwen3_tok, BOTH)
    text = chat(qwen3_tok, ["broken \ud800 text"])
    with pytest.raises(TypeError):
        qwen3_tok.encode(text)
    with pytest.raises(TypeError, match="must be str"):  # the Rust tokenizer's refusal
        cached.encode(text)
    stats = cached.stats()
    assert stats.l0.entries == 0 and stats.l1.entries == 0


def test_probes_reach_the_first_half_of_a_prompt_with_many_boundaries(qwen3_tok: Any) -> None:
    """Past `MAX_BOUNDARIES` the backward scan stops half way, and the first boundaries
    (a few-shot prefix shared by later prompts) are still probed, deepest first."""
    cached = CachedTokenizer(qwen3_tok, BOTH)
    turns = [f"shot {i}" for i in range(80)]
    text = chat(qwen3_tok, turns)
    data = text.encode()
    assert len(cached.plan.match_starts(data)) > 2 * MAX_BOUNDARIES
    assert list(cached.prefix.probe_starts(data)) == cached.prefix.boundaries(data)[::-1]
    assert cached.encode(text) == qwen3_tok.encode(text)
    follow = chat(qwen3_tok, [*turns[:20], "a different ending"])
    assert cached.encode(follow) == qwen3_tok.encode(follow)
    assert cached.stats().l1.hits == 1


def test_short_prompts_skip_l1(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, TokenizerCacheConfig(enable_l1=True, l1_min_prompt_chars=10_000))
    text = chat(smollm2_tokenizer, ["short"])
    assert cached.encode(text) == smollm2_tokenizer.encode(text)
    l1 = cached.stats().l1
    assert (l1.hits, l1.misses, l1.entries) == (0, 0, 0)


def test_uncacheable_options_and_batches_go_to_the_plain_tokenizer(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, BOTH)
    out = cached("hello world", return_offsets_mapping=True)
    assert out["offset_mapping"] == smollm2_tokenizer("hello world", return_offsets_mapping=True)["offset_mapping"]
    assert cached(["a b", "c"])["input_ids"] == smollm2_tokenizer(["a b", "c"])["input_ids"]
    assert cached.encode("a b c d", truncation=True, max_length=2) == smollm2_tokenizer.encode(
        "a b c d", truncation=True, max_length=2
    )
    assert cached.encode("a b", "c d") == smollm2_tokenizer.encode("a b", "c d")  # a text pair
    assert cached.stats().bypassed == 4


def test_backend_truncation_bypasses_the_cache(smollm2_tokenizer: Any) -> None:
    cached = CachedTokenizer(smollm2_tokenizer, BOTH)
    backend = smollm2_tokenizer.backend_tokenizer
    text = chat(smollm2_tokenizer, ["hello " * 50])
    backend.enable_truncation(max_length=8)
    try:
        assert len(cached.encode(text)) == len(smollm2_tokenizer.encode(text))
        assert cached.stats().bypassed == 1
    finally:
        backend.no_truncation()


# -- isolation and concurrency -------------------------------------------------------


def test_tokenizers_sharing_stores_never_read_each_others_entries(smollm2_tokenizer: Any, qwen3_tok: Any) -> None:
    stores = CacheStores.from_config(BOTH, typecode="I")
    small = CachedTokenizer(smollm2_tokenizer, BOTH, stores=stores)
    qwen = CachedTokenizer(qwen3_tok, BOTH, stores=stores)
    assert small.tokenizer_sha256 != qwen.tokenizer_sha256
    text = "<|im_start|>system\nYou are nice.<|im_end|>\n<|im_start|>user\nHi 123<|im_end|>\n"
    assert small.encode(text) == smollm2_tokenizer.encode(text)
    assert qwen.encode(text) == qwen3_tok.encode(text) != smollm2_tokenizer.encode(text)
    assert stores.l0.stats().hits == 0 and stores.l1.stats().hits == 0


def test_concurrent_requests_get_exact_ids(qwen3_tok: Any) -> None:
    cached = CachedTokenizer(
        qwen3_tok,
        TokenizerCacheConfig(
            enable_l0=True, l0_max_entries=50, enable_l1=True, l1_max_memory=200_000, l1_min_prompt_chars=0
        ),
    )
    texts = [chat(qwen3_tok, [f"q{i % 7}", f"a{i % 5}", f"follow-up {i}"]) for i in range(60)]
    want = [qwen3_tok.encode(t) for t in texts]
    errors: list[str] = []

    def worker(offset: int) -> None:
        for j in range(len(texts)):
            k = (j * 7 + offset) % len(texts)
            if cached.encode(texts[k]) != want[k]:
                errors.append(texts[k])

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert cached.stats().l1.hits > 0


# -- the traps are real, and handled -------------------------------------------------


def test_metaspace_first_would_break_a_split_after_the_special_token(metaspace_tok: Any) -> None:
    text = "hello<|user|>world again"
    whole = metaspace_tok.encode(text, add_special_tokens=False)
    after = text.index("world")
    naive = metaspace_tok.encode(text[:after], add_special_tokens=False) + metaspace_tok.encode(
        text[after:], add_special_tokens=False
    )
    assert naive != whole  # the suffix got a prefix space it does not get in the whole
    cached = CachedTokenizer(metaspace_tok, BOTH)
    assert cached.encode(text) == metaspace_tok.encode(text)


def test_bert_template_is_added_once_around_the_whole(bert_tok: Any) -> None:
    text = "first part [SEP] second part [SEP] third"
    per_piece = [i for piece in ("first part ", "[SEP] second part ", "[SEP] third") for i in bert_tok.encode(piece)]
    assert per_piece != bert_tok.encode(text)
    cached = CachedTokenizer(bert_tok, BOTH)
    for _ in range(2):
        assert cached.encode(text) == bert_tok.encode(text)
        assert dict(cached(text)) == dict(bert_tok(text))


def test_overlapping_and_stripping_tokens_are_not_split_points() -> None:
    tok = metaspace_tokenizer()
    cached = CachedTokenizer(tok, BOTH)
    for text in ["the<s> x", "a <mask> b<s>c", "w<sw>s> y", "<tool_call><tool> x<s>", "xs><s>"]:
        for _ in range(2):
            assert cached.encode(text) == tok.encode(text), text


def test_unprovable_tokenizer_refuses_l1_and_keeps_l0() -> None:
    from tokenizers import pre_tokenizers

    tok = metaspace_tokenizer()
    tok.backend_tokenizer.pre_tokenizer = pre_tokenizers.FixedLength(length=3)
    cached = CachedTokenizer(tok, BOTH)
    assert not cached.plan.l1_ok and "FixedLength" in cached.plan.reason
    assert "FixedLength" in cached.stats().l1_refused
    text = "hello<|user|>world again"
    assert cached.encode(text) == cached.encode(text) == tok.encode(text)
    assert cached.stats().l0.hits == 1 and cached.stats().l1 is None


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda spec: spec["model"].update(dropout=0.1), "dropout"),
        (lambda spec: spec.update(post_processor={"type": "Mystery"}), "post-processor 'Mystery'"),
        (
            lambda spec: spec.update(normalizer={"type": "Sequence", "normalizers": [{"type": "Mystery"}]}),
            "Mystery",
        ),
        (lambda spec: spec.update(added_tokens=[]), "no added token"),
    ],
)
def test_plan_refuses_what_it_cannot_prove(metaspace_tok: Any, edit: Any, reason: str) -> None:
    import json

    from dlm.serve.tokcache import plan_for

    spec = json.loads(metaspace_tok.backend_tokenizer.to_str())
    edit(spec)
    plan = plan_for(json.dumps(spec))
    assert not plan.l1_ok and reason in plan.reason
    assert plan.deterministic == (reason != "dropout")


def test_random_tokenizer_is_never_cached() -> None:
    tok = metaspace_tokenizer()
    tok.backend_tokenizer.model.dropout = 0.5
    cached = CachedTokenizer(tok, BOTH)
    assert not cached.enabled
    cached.encode("hello world")
    assert cached.stats().bypassed == 1


@pytest.mark.parametrize("kind", ["roberta", "llama-legacy", "metaspace-always"])
def test_other_split_relevant_shapes_stay_exact(kind: str) -> None:
    import random

    from serve_tokenizers import variant_tokenizer

    tok = variant_tokenizer(kind)
    cached = CachedTokenizer(tok, BOTH)
    assert cached.plan.l1_ok, cached.plan.reason
    fragments = ["<s>", "</s>", "<mask>", " ", "  ", "hello", "world", " foo", "\n", "café", "12", "x"]
    rng = random.Random(7)
    for _ in range(1500):
        text = "".join(rng.choice(fragments) for _ in range(rng.randint(0, 10)))
        for special in (True, False):
            assert cached.encode(text, add_special_tokens=special) == tok.encode(text, add_special_tokens=special)
            assert dict(cached(text, add_special_tokens=special)) == dict(tok(text, add_special_tokens=special))
    assert cached.stats().l1.hits > 0

"""What a miss of the serving tokenizer cache costs: one tokenizer call, as without a cache.

A prompt that shares no cached prefix (the first turn of every conversation, every
prompt of a one-pass workload) must not cost more than the plain tokenizer; the
tokenizer's fixed cost per call is what a piece-by-piece encode multiplies, so the
cache makes exactly one call on a miss whatever the number of boundaries.
"""

from __future__ import annotations

from typing import Any

from dlm.serve.tokcache import CachedTokenizer, TokenizerCacheConfig
from dlm.serve.tokcache.prefix import HEAD_BOUNDARIES, MAX_BOUNDARIES, TAIL_STORED

BOTH = TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)


class Recording:
    """The cache's backend, recording every text it is asked to encode."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.seen: list[str] = []

    def encode(self, text: str, **kwargs: Any) -> Any:
        self.seen.append(text)
        return self.backend.encode(text, **kwargs)

    def encode_batch_fast(self, texts: list[str], **kwargs: Any) -> Any:
        self.seen.extend(texts)
        return self.backend.encode_batch_fast(texts, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.backend, name)


def conversation(tok: Any, n_turns: int, tag: str) -> str:
    """A chat prompt of `n_turns` turns (odd: Qwen3's template renders a trailing
    assistant turn differently once a user turn follows it)."""
    messages = [{"role": "system", "content": f"You help with {tag}. Be brief, café 東京."}]
    for i in range(n_turns):
        role = "user" if i % 2 == 0 else "assistant"
        messages.append({"role": role, "content": f"{tag} turn {i}: some words, 12345"})
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def recording(tok: Any) -> tuple[CachedTokenizer, Recording]:
    cached = CachedTokenizer(tok, BOTH)
    assert cached.prefix is not None
    spy = Recording(cached.prefix.backend)
    cached.prefix.backend = spy
    return cached, spy


def test_a_miss_encodes_the_prompt_in_one_call_and_stores_its_head_and_tail(qwen3_tok: Any) -> None:
    cached, spy = recording(qwen3_tok)
    text = conversation(qwen3_tok, 11, "billing")
    data = text.encode()
    starts = [b for b in cached.plan.match_starts(data) if b > 0]
    assert len(starts) > MAX_BOUNDARIES
    kept = starts[:HEAD_BOUNDARIES] + starts[-TAIL_STORED:]
    for special in (True, False):
        cached.clear()
        spy.seen.clear()
        assert cached.encode(text, add_special_tokens=special) == qwen3_tok.encode(text, add_special_tokens=special)
        assert spy.seen == [text]
        l1 = cached.stats().l1
        assert (l1.hits, l1.misses, l1.entries) == (0, 1, len(kept))
        for start, key in zip(starts, cached.prefix.prefix_keys(data, starts), strict=True):
            entry = cached.prefix.store.get(key)
            assert (entry is not None) == (start in kept)
            if entry is not None:
                assert entry.tolist() == qwen3_tok.encode(data[:start].decode(), add_special_tokens=False)


def test_warming_encodes_the_prompt_in_one_call(qwen3_tok: Any) -> None:
    cached, spy = recording(qwen3_tok)
    text = conversation(qwen3_tok, 3, "shipping")
    stored = cached.warm(text)
    assert spy.seen == [text]
    assert stored == cached.stats().l1.entries > 0
    longer = conversation(qwen3_tok, 5, "shipping")
    assert cached.encode(longer) == qwen3_tok.encode(longer)
    assert cached.stats().l1.hits == 1


def test_the_next_turn_after_a_miss_encodes_only_the_new_turn(qwen3_tok: Any) -> None:
    """The miss learns the closing pieces too, so the growing conversation's next prompt
    sends only its new text to the tokenizer."""
    cached, spy = recording(qwen3_tok)
    first = conversation(qwen3_tok, 3, "refunds")
    assert cached.encode(first) == qwen3_tok.encode(first)
    spy.seen.clear()
    second = conversation(qwen3_tok, 5, "refunds")
    assert cached.encode(second) == qwen3_tok.encode(second)
    assert spy.seen == [
        "<|im_start|>assistant\nrefunds turn 3: some words, 12345<|im_end|>\n<|im_start|>user\nrefunds turn 4: some words, 12345"
    ]

"""Property: the cached tokenizer's ids equal the plain tokenizer's, for every text.

One shared, deliberately small cache per tokenizer family lives across all examples,
so prefixes from earlier examples hit, entries get evicted, and growing
conversations (each turn extending the last prompt) exercise the "store the deepest
new boundary" path. Texts mix special tokens (including overlapping ones and their
fragments), chat-template pieces, whitespace, digits and unicode.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlm.serve.tokcache import CachedTokenizer, TokenizerCacheConfig

SMALL = TokenizerCacheConfig(
    enable_l0=True, l0_max_entries=200, enable_l1=True, l1_max_memory=256 * 1024, l1_min_prompt_chars=0
)
FAMILIES = ["smollm2", "qwen3", "bert", "metaspace"]
SYSTEM_PROMPTS = [
    "You are a helpful assistant. Answer briefly.",
    "Tu es un assistant. Réponds en français, s'il te plaît : café, naïve.",
    "System: 東京 の 天気 は？ 1234 5678 \t tabs\tand  double  spaces",
    "",
]
WORDS = ["hello", "world", "Hello", "HELLO", "there", "def", "return", "x=1", "café", "naïve",
         "東京", "Привет", "🙂", "ß", "ﬁ", "Ａ", "<", ">", "|", "<|", "|>", "[", "]", "##", "▁", "'s", "'ll"]  # fmt: skip
SPACES = [" ", "  ", "\n", "\n\n", "\t", "\r\n", " \n", "\u00a0", "\u3000", ""]
_shared: dict[str, CachedTokenizer] = {}


@pytest.fixture(params=FAMILIES)
def family(request: pytest.FixtureRequest) -> tuple[Any, CachedTokenizer]:
    fixture = {"smollm2": "smollm2_tokenizer", "qwen3": "qwen3_tok", "bert": "bert_tok"}.get(
        request.param, "metaspace_tok"
    )
    tok = request.getfixturevalue(fixture)
    if request.param not in _shared:
        _shared[request.param] = CachedTokenizer(tok, SMALL)
    cached = _shared[request.param]
    assert cached.plan.l1_ok, cached.plan.reason
    return tok, cached


def _specials(tok: Any) -> list[str]:
    added = [t.content for t in tok.backend_tokenizer.get_added_tokens_decoder().values()]
    return sorted(added)[:40] + ["hello there", "<mask>", "<sw>", "e<s", "<think>", "</think>"]


def _chat_pieces(tok: Any) -> list[str]:
    """Fragments of the family's own chat template (or a ChatML-like stand-in)."""
    if getattr(tok, "chat_template", None):
        marker = "\x00"
        rendered = tok.apply_chat_template(
            [{"role": "system", "content": marker}, {"role": "user", "content": marker}],
            tokenize=False,
            add_generation_prompt=True,
        )
        return [piece for piece in rendered.split(marker) if piece]
    cls, sep = tok.cls_token or tok.bos_token, tok.sep_token or tok.eos_token
    return [f"{cls} user: ", f" {sep}\n", f"{sep}{cls}assistant:"]


def _fragment(specials: list[str], chat: list[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(specials),
        st.sampled_from(chat),
        st.sampled_from(WORDS),
        st.sampled_from(SPACES),
        st.integers(0, 10**6).map(str),
        st.text(max_size=6),
    )


def _turn(specials: list[str], chat: list[str]) -> st.SearchStrategy[str]:
    return st.lists(_fragment(specials, chat), max_size=8).map("".join)


def _check(tok: Any, cached: CachedTokenizer, text: str) -> None:
    for special in (True, False):
        want = tok.encode(text, add_special_tokens=special)
        got = cached.encode(text, add_special_tokens=special)
        assert got == want, (text, special)
        got.append(-1)  # a caller changing its result must not change the cache
        assert dict(cached(text, add_special_tokens=special)) == dict(tok(text, add_special_tokens=special))


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cached_ids_equal_plain_ids(family: tuple[Any, CachedTokenizer], data: st.DataObject) -> None:
    tok, cached = family
    specials, chat = _specials(tok), _chat_pieces(tok)
    prompt = data.draw(st.sampled_from(SYSTEM_PROMPTS))
    for turn in data.draw(st.lists(_turn(specials, chat), min_size=1, max_size=4)):
        prompt += turn
        _check(tok, cached, prompt)


def test_real_families_scan_by_lead_byte(family: tuple[Any, CachedTokenizer]) -> None:
    """ChatML and BERT tokens share one lead byte, so hits scan back from the end; the
    test Metaspace tokenizer has added tokens `s>` and `e<s` and scans forward."""
    tok, cached = family
    leads = {"[CLS]": b"[", "<|im_start|>": b"<", "<s>": b""}
    lead = next(want for marker, want in leads.items() if marker in tok.get_vocab())
    assert cached.plan.match_lead == lead


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_boundary_scan_equals_a_regex_scan(family: tuple[Any, CachedTokenizer], data: st.DataObject) -> None:
    """The forward and backward scans from the lead byte find what `finditer` finds,
    and the probe order is every kept boundary, deepest first."""
    tok, cached = family
    text = data.draw(_turn(_specials(tok), _chat_pieces(tok)))
    raw = (data.draw(st.sampled_from(["", "<", "[", "<|", "a"])) + text).encode("utf-8", "surrogatepass")
    forward = cached.plan.match_starts(raw)
    assert forward == [m.start() for m in cached.plan.match_re.finditer(raw)]  # by lead byte, or the regex
    if cached.plan.match_lead:
        assert list(cached.plan.match_starts_reversed(raw)) == forward[::-1]
    assert list(cached.prefix.probe_starts(raw)) == cached.prefix.boundaries(raw)[::-1]


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_cached_ids_equal_plain_ids_soak(family: tuple[Any, CachedTokenizer], data: st.DataObject) -> None:
    """The same property, ten times the examples (`make test-slow`)."""
    test_cached_ids_equal_plain_ids.hypothesis.inner_test(family, data)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_every_stored_prefix_is_the_plain_ids_of_that_prefix(
    family: tuple[Any, CachedTokenizer], data: st.DataObject
) -> None:
    """Each L1 entry a prompt leaves behind (by a miss, a hit or `warm`) holds exactly the
    plain ids of the prompt's bytes before that boundary: a wrong cut would only show in
    a later prompt that happens to hit it, so every entry is checked here directly."""
    tok, cached = family
    specials, chat = _specials(tok), _chat_pieces(tok)
    prompt = data.draw(st.sampled_from(SYSTEM_PROMPTS))
    for turn in data.draw(st.lists(_turn(specials, chat), min_size=1, max_size=4)):
        prompt += turn
        if data.draw(st.booleans()):
            cached.warm(prompt)
        else:
            _check(tok, cached, prompt)
        raw = prompt.encode("utf-8", "surrogatepass")
        if raw != prompt.encode("utf-8", "replace"):
            continue  # lone surrogates never reach L1
        starts = [b for b in cached.plan.match_starts(raw) if b > 0]
        for start, key in zip(starts, cached.prefix.prefix_keys(raw, starts), strict=True):
            entry = cached.prefix.store.get(key)
            if entry is not None:
                want = tok.encode(raw[:start].decode("utf-8"), add_special_tokens=False)
                assert entry.tolist() == want, (prompt, start)

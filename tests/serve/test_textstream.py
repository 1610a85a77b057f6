"""TextStream: streamed text equals the whole reply cut at the first stop string, for
any ids of the real SmolLM2 vocabulary (byte-level BPE: characters split over ids)."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlm.infer.textstream import TextStream

EOS = 2
TEXTS = ["Hello, world!\nSecond line.", "naïve café 東京 🙂 done", "a\n\nb ```code``` end", "x" * 30]


def whole_reply(tok: Any, ids: list[int], stop: list[str]) -> tuple[str, bool, int]:
    """What the reply must be: generation ends at the first id whose text holds a stop
    string (cut before it) or at EOS; (text, stopped, ids consumed)."""
    for k in range(1, len(ids) + 1):
        if ids[k - 1] == EOS:
            return tok.decode(ids[: k - 1], skip_special_tokens=True), False, k
        text = tok.decode(ids[:k], skip_special_tokens=True)
        hits = [text.find(s) for s in stop if s in text]
        if hits:
            return text[: min(hits)], True, k
    return tok.decode(ids, skip_special_tokens=True), False, len(ids)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_streamed_text_is_the_reply_cut_at_the_first_stop(smollm2_tokenizer: Any, data: st.DataObject) -> None:
    tok = smollm2_tokenizer
    base = tok.encode(data.draw(st.sampled_from(TEXTS)), add_special_tokens=False)
    noise = data.draw(st.lists(st.integers(17, 49151), max_size=6))  # any id, bytes included
    ids = base + noise
    if data.draw(st.booleans()):
        ids.insert(data.draw(st.integers(0, len(ids))), EOS)
    full = tok.decode(ids, skip_special_tokens=True)
    stop = data.draw(
        st.lists(
            st.one_of(
                st.integers(0, max(len(full) - 1, 0)).flatmap(
                    lambda i: st.integers(i + 1, i + 4).map(lambda j: full[i:j])
                ),
                st.sampled_from(["\n", "zz", "line", "é 東"]),
            ),
            max_size=4,
        ).map(lambda xs: [x for x in xs if x and "\ufffd" not in x])
    )
    stream = TextStream(tok, stop, frozenset({EOS}))
    out = []
    for token in ids:
        step = stream.push(token)
        out.append(step.text)
        if step.stopped or token == EOS:
            break
    out.append(stream.finish())
    want, stopped, consumed = whole_reply(tok, ids, stop)
    assert "".join(out) == want
    assert stream.stopped == stopped
    assert stream.n_ids == consumed
    for s in stop:  # no stop string ever reached the client, even split over pieces
        assert s not in "".join(out)

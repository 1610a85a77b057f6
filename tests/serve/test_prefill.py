"""Prefill in chunks on the real SmolLM2-135M-Instruct: the same logits and greedy ids
as one forward pass over the whole prompt, and a cancellation check between chunks,
so a client that goes away during a long prompt frees the model within one chunk."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch

from dlm.infer.decode import Sampling, TorchEngine

pytestmark = pytest.mark.integration

CHUNK = 64


@pytest.fixture(scope="module")
def model(smollm2_ref: Any) -> Any:
    from dlm.models import load_model

    return load_model(smollm2_ref).eval()


def engine(model: Any, tokenizer: Any, chunk: int) -> TorchEngine:
    loaded = SimpleNamespace(model=model, tokenizer=tokenizer, model_id="smollm2", system_prompt=None)
    return TorchEngine(loaded, prefill_chunk=chunk)


LONG_MESSAGES = [
    {
        "role": "user",
        "content": " ".join(f"Item {i} is a {['red', 'green', 'blue'][i % 3]} box." for i in range(40))
        + " Which colour is item 7?",
    }
]


def long_prompt(tokenizer: Any) -> list[int]:
    messages = LONG_MESSAGES
    ids = tokenizer.encode(
        tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True), add_special_tokens=False
    )
    assert len(ids) > 4 * CHUNK + 1  # several chunks and a partial one
    return ids


def test_chunked_prefill_gives_the_one_shot_logits_and_ids(model: Any, smollm2_tokenizer: Any) -> None:
    ids = long_prompt(smollm2_tokenizer)
    with torch.inference_mode():
        reference = model(input_ids=torch.tensor([ids])).logits[0, -1].double()  # (vocab,)
    chunked = engine(model, smollm2_tokenizer, CHUNK)
    _, logits = chunked.prefill(ids)
    torch.testing.assert_close(logits, reference, atol=2e-4, rtol=1e-4)
    assert int(logits.argmax()) == int(reference.argmax())
    one_shot = engine(model, smollm2_tokenizer, len(ids))
    want = list(one_shot.generate_ids(ids, max_new_tokens=8, sampling=Sampling()))
    assert list(chunked.generate_ids(ids, max_new_tokens=8, sampling=Sampling())) == want


def test_cancellation_is_checked_between_prefill_chunks(model: Any, smollm2_tokenizer: Any) -> None:
    ids = long_prompt(smollm2_tokenizer)
    forwards: list[int] = []
    hook = model.register_forward_pre_hook(
        lambda _m, _a, kw: forwards.append(kw["input_ids"].shape[1]), with_kwargs=True
    )
    checks = []

    def cancelled() -> bool:
        checks.append(len(forwards))
        return len(forwards) >= 2  # the client goes away while the second chunk runs

    try:
        got = list(
            engine(model, smollm2_tokenizer, CHUNK).generate_ids(
                ids, max_new_tokens=8, sampling=Sampling(), cancelled=cancelled
            )
        )
    finally:
        hook.remove()
    assert got == []  # no id generated, the rest of the prompt never ran
    assert forwards == [CHUNK, CHUNK] and checks[-1] == 2


def test_cancellation_is_checked_between_decoding_steps(model: Any, smollm2_tokenizer: Any) -> None:
    ids = long_prompt(smollm2_tokenizer)
    seen: list[int] = []
    stream = engine(model, smollm2_tokenizer, CHUNK).generate_ids(
        ids, max_new_tokens=8, sampling=Sampling(), cancelled=lambda: len(seen) >= 3
    )
    for token in stream:
        seen.append(token)
    assert len(seen) == 3


def test_a_client_gone_during_a_long_prefill_frees_the_model_within_a_chunk(model: Any, smollm2_tokenizer: Any) -> None:
    """Each forward pass is slowed down (a hook sleeps) so that the prompt's prefill
    outlasts the client's patience by far; the server must stop after a chunk or two."""
    import time

    import httpx

    from dlm.serve.app import create_app
    from dlm.serve.server import RunningServer

    chunk, pause = 16, 0.25
    ids = long_prompt(smollm2_tokenizer)
    n_chunks = -(-len(ids) // chunk)  # about 6 s of prefill at `pause` per chunk
    forwards: list[int] = []

    def slow(_module: Any, _args: Any, kwargs: Any) -> None:
        forwards.append(kwargs["input_ids"].shape[1])
        time.sleep(pause)

    hook = model.register_forward_pre_hook(slow, with_kwargs=True)
    try:
        served = create_app(engine(model, smollm2_tokenizer, chunk))
        with RunningServer(served.app, "127.0.0.1", 0) as running:
            body = {"messages": LONG_MESSAGES, "max_tokens": 4}
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(running.url + "/v1/chat/completions", json=body, timeout=0.6)
            deadline = time.monotonic() + 10
            while served.state.generation.running and time.monotonic() < deadline:
                time.sleep(0.02)
            assert not served.state.generation.running
            done = len(forwards)
            metrics = httpx.get(running.url + "/metrics").text
    finally:
        hook.remove()
    assert 'dlm_generation_requests_total{outcome="client_disconnected"} 1.0' in metrics
    assert done <= 8 < n_chunks, (done, n_chunks)  # stopped within about a chunk of noticing
    assert all(n == chunk for n in forwards)  # never reached the last, partial chunk nor a decoding step

"""The server's decoding loop on the real SmolLM2-135M-Instruct, driven by the official
`openai` client over real HTTP: stop strings, finish reasons, usage from the ids
generated, seeded sampling, extreme temperatures."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from openai import OpenAI

from dlm.infer.decode import Sampling, TorchEngine, _pick
from dlm.serve.app import create_app
from dlm.serve.server import RunningServer
from dlm.serve.tokcache import TokenizerCacheConfig
from dlm.serve.warm import warm_start

pytestmark = pytest.mark.integration

QUESTION = [{"role": "user", "content": "Write a short poem about the sea."}]


@pytest.fixture(scope="module")
def engine(smollm2_ref: Any, smollm2_tokenizer: Any) -> TorchEngine:
    from dlm.models import load_model

    model = load_model(smollm2_ref)
    model.eval()
    loaded = SimpleNamespace(model=model, tokenizer=smollm2_tokenizer, model_id="smollm2", system_prompt=None)
    return TorchEngine(loaded)


@pytest.fixture(scope="module")
def client(engine: TorchEngine) -> Iterator[OpenAI]:
    config = TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)
    _, cached = warm_start(engine.loaded, config)
    with RunningServer(create_app(engine, cached=cached)) as running:
        yield OpenAI(base_url=running.url + "/v1", api_key="unused", timeout=120, max_retries=0)


def plain_ids(engine: TorchEngine, n: int) -> list[int]:
    """The greedy reply's first `n` ids, from the engine directly."""
    text = engine.tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True)
    prompt = engine.tokenizer.encode(text, add_special_tokens=False)
    return list(engine.generate_ids(prompt, max_new_tokens=n, sampling=Sampling()))


def test_finish_length_and_usage_count_the_ids_generated(client: OpenAI, engine: TorchEngine) -> None:
    want = plain_ids(engine, 12)
    assert not set(want) & engine.eos_token_ids  # the reply is longer than 12 ids
    for max_tokens in (6, 7, 8):
        reply = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=max_tokens)
        assert reply.choices[0].finish_reason == "length"
        assert reply.usage.completion_tokens == max_tokens
        assert reply.choices[0].message.content == engine.tokenizer.decode(want[:max_tokens])


def test_stop_ends_the_reply_in_plain_and_streamed_responses(client: OpenAI, engine: TorchEngine) -> None:
    full = engine.tokenizer.decode(plain_ids(engine, 24))
    assert "\n" in full
    reply = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=24, stop=["\n"])
    assert reply.choices[0].message.content == full.split("\n")[0]
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens < 24
    stream = client.chat.completions.create(
        model="smollm2", messages=QUESTION, max_tokens=24, stop="\n", stream=True,
        stream_options={"include_usage": True},
    )  # fmt: skip
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == full.split("\n")[0]
    assert chunks[-1].usage.completion_tokens == reply.usage.completion_tokens


def test_a_reply_ended_by_eos_finishes_with_stop(client: OpenAI) -> None:
    reply = client.chat.completions.create(
        model="smollm2", messages=[{"role": "user", "content": "List three colours, one per line."}], max_tokens=200
    )
    assert reply.choices[0].finish_reason == "stop"
    assert reply.usage.completion_tokens < 200


def test_same_seed_same_sample_and_extreme_temperatures_work(client: OpenAI) -> None:
    def sample(seed: int, temperature: float = 1.5) -> str:
        reply = client.chat.completions.create(
            model="smollm2", messages=QUESTION, max_tokens=6, temperature=temperature, seed=seed
        )
        return reply.choices[0].message.content or ""

    assert sample(1) == sample(1)
    assert len({sample(s) for s in range(2, 5)}) > 1
    greedy = client.chat.completions.create(model="smollm2", messages=QUESTION, max_tokens=6)
    assert sample(3, temperature=1e-300) == greedy.choices[0].message.content


def test_pick_is_finite_at_any_positive_temperature() -> None:
    logits = torch.tensor([1.0, 3.0, 2.9, -50.0], dtype=torch.float64)
    generator = torch.Generator().manual_seed(0)
    for temperature in (5e-324, 1e-300, 1e-5):
        assert _pick(logits, Sampling(temperature=temperature), generator) == 1
    draws = {_pick(logits, Sampling(temperature=2.0, top_p=0.3), generator) for _ in range(50)}
    assert draws == {1}  # nucleus of mass 0.3 holds the top id only

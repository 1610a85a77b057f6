"""The OpenAI-compatible app over real HTTP (uvicorn on 127.0.0.1, ephemeral port), with
the real SmolLM2 tokenizer and a deterministic fake engine standing in for the model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from fake_engine import SYSTEM, FakeEngine, expected_text
from openai import OpenAI

from dlm.serve.app import create_app
from dlm.serve.server import RunningServer
from dlm.serve.tokcache import TokenizerCacheConfig

CACHE = TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)


@pytest.fixture
def engine(smollm2_tokenizer: Any) -> FakeEngine:
    return FakeEngine(smollm2_tokenizer)


@pytest.fixture
def server(engine: FakeEngine) -> Iterator[RunningServer]:
    with RunningServer(create_app(engine, CACHE, max_body_bytes=64 * 1024), "127.0.0.1", 0) as running:
        yield running


@pytest.fixture
def http(server: RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


def openai_client(server: RunningServer) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=30, max_retries=0)


def plain_prompt_ids(tok: Any, messages: list[dict[str, Any]]) -> list[int]:
    full = [{"role": "system", "content": SYSTEM}, *messages]
    text = tok.apply_chat_template(full, tokenize=False, add_generation_prompt=True)
    return tok.encode(text, add_special_tokens=False)


def test_health_and_models(http: httpx.Client) -> None:
    assert http.get("/health").json() == {"status": "ok", "model": "dlm:fake"}
    models = http.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["dlm:fake"]


def test_chat_completion_with_the_openai_client(
    server: RunningServer, engine: FakeEngine, smollm2_tokenizer: Any
) -> None:
    client = openai_client(server)
    messages = [{"role": "user", "content": "alpha beta gamma"}]
    reply = client.chat.completions.create(model="dlm:fake", messages=messages, max_tokens=8)
    assert reply.choices[0].message.content == expected_text("alpha beta gamma")
    assert reply.model == "dlm:fake"
    want_ids = plain_prompt_ids(smollm2_tokenizer, messages)
    assert engine.calls[-1][0] == want_ids  # tokenized through the cache, exactly
    assert reply.usage.prompt_tokens == len(want_ids)


def test_streaming_chat_with_the_openai_client(server: RunningServer) -> None:
    client = openai_client(server)
    stream = client.chat.completions.create(
        model="dlm:fake",
        messages=[{"role": "user", "content": "one two three four"}],
        max_tokens=8,
        stream=True,
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text == expected_text("one two three four")
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_tokenize_prompt_and_messages_match_the_plain_tokenizer(http: httpx.Client, smollm2_tokenizer: Any) -> None:
    prompt = "<|im_start|>user\nHow many tokens is this? 12345<|im_end|>\n"
    for _ in range(2):
        body = http.post("/tokenize", json={"prompt": prompt}).json()
        assert body == {
            "tokens": smollm2_tokenizer.encode(prompt),
            "count": len(body["tokens"]),
            "max_model_len": 2048,
        }
    messages = [{"role": "user", "content": "hi there"}]
    body = http.post("/tokenize", json={"messages": messages}).json()
    assert body["tokens"] == plain_prompt_ids(smollm2_tokenizer, messages)


def test_metrics_report_requests_and_cache_levels(http: httpx.Client) -> None:
    for i in range(3):
        http.post("/tokenize", json={"messages": [{"role": "user", "content": f"question {i}"}]})
    text = http.get("/metrics").text
    assert 'dlm_requests_total{endpoint="/tokenize",status="200"} 3.0' in text
    assert 'dlm_request_seconds_count{endpoint="/tokenize"} 3.0' in text
    assert 'dlm_tokenizer_cache_hits_total{level="l1"} 2.0' in text
    assert 'dlm_tokenizer_cache_hit_rate{level="l0"}' in text
    assert 'dlm_tokenizer_cache_bytes{level="l1"}' in text
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if not line.startswith("#"))
    cached = float(values['dlm_tokenizer_cache_tokens_total{source="cached"}'])
    encoded = float(values['dlm_tokenizer_cache_tokens_total{source="encoded"}'])
    assert cached > 0 and encoded > 0  # the second and third prompts reused the first's prefix
    ratio = float(values["dlm_tokenizer_cache_token_reuse_ratio"])
    assert ratio == pytest.approx(cached / (cached + encoded))
    assert "dlm_generation_queue_waiting 0.0" in text and "dlm_generation_running 0.0" in text


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        (b'{"messages": [', 400, "not valid JSON"),
        (b'{"messages": []}', 400, "messages"),
        (b'{"messages": [{"role": "robot", "content": "x"}]}', 400, "messages.0.role"),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": 9}', 400, "temperature"),
        (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}', 400, "max_tokens"),
    ],
)
def test_bad_chat_requests_get_clear_errors(http: httpx.Client, body: bytes, status: int, needle: str) -> None:
    response = http.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status
    assert needle in response.json()["error"]["message"]


def test_tokenize_needs_exactly_one_input(http: httpx.Client) -> None:
    for body in ({}, {"prompt": "a", "messages": [{"role": "user", "content": "b"}]}):
        response = http.post("/tokenize", json=body)
        assert response.status_code == 400
        assert "exactly one of 'prompt' or 'messages'" in response.json()["error"]["message"]


def test_oversized_bodies_get_413(http: httpx.Client) -> None:
    big = json.dumps({"prompt": "x" * 70_000}).encode()
    assert http.post("/tokenize", content=big, headers={"content-type": "application/json"}).status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while reading
        for i in range(0, len(big), 8192):
            yield big[i : i + 8192]

    response = http.post("/tokenize", content=chunks(), headers={"content-type": "application/json"})
    assert response.status_code == 413
    assert "request body over" in response.json()["error"]["message"]


def test_prompt_longer_than_the_context_is_refused(http: httpx.Client) -> None:
    messages = [{"role": "user", "content": "word " * 2100}]
    response = http.post("/v1/chat/completions", json={"messages": messages, "max_tokens": 8})
    assert response.status_code == 400
    assert "max_model_len (2048)" in response.json()["error"]["message"]


def test_concurrent_requests_are_served_one_generation_at_a_time(smollm2_tokenizer: Any) -> None:
    engine = FakeEngine(smollm2_tokenizer, delay=0.005)
    with RunningServer(create_app(engine, CACHE), "127.0.0.1", 0) as running:
        client = openai_client(running)

        def ask(i: int) -> str:
            messages = [{"role": "user", "content": f"request {i} a b c"}]
            return (
                client.chat.completions.create(model="dlm:fake", messages=messages, max_tokens=8)
                .choices[0]
                .message.content
            )

        with ThreadPoolExecutor(max_workers=6) as pool:
            replies = list(pool.map(ask, range(12)))
    assert replies == [expected_text(f"request {i} a b c") for i in range(12)]
    assert engine.max_active == 1


def test_generation_failure_is_a_500_or_an_error_event(smollm2_tokenizer: Any) -> None:
    engine = FakeEngine(smollm2_tokenizer, fail=True)
    with (
        RunningServer(create_app(engine, CACHE), "127.0.0.1", 0) as running,
        httpx.Client(base_url=running.url, timeout=30) as http,
    ):
        body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 8}
        response = http.post("/v1/chat/completions", json=body)
        assert response.status_code == 500
        assert "out of memory" in response.json()["error"]["message"]
        streamed = http.post("/v1/chat/completions", json={**body, "stream": True}).text
        assert '"error"' in streamed and "out of memory" in streamed

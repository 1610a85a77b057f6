"""Where OpenAI's API is strict, so is the server: request types are not coerced,
ranges are OpenAI's, error bodies carry a string `code`, `GET /v1/models/{id}` exists,
and a stream the client abandoned is still counted. Real HTTP, the real SmolLM2
tokenizer, a scripted engine standing in for the model."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from fake_engine import FakeEngine
from openai import OpenAI

from dlm.serve.app import create_app
from dlm.serve.server import RunningServer
from dlm.serve.tokcache import TokenizerCacheConfig

LONG = " ".join(f"word{i}" for i in range(400))
USER = [{"role": "user", "content": "x"}]


@pytest.fixture
def engine(smollm2_tokenizer: Any) -> FakeEngine:
    return FakeEngine(smollm2_tokenizer, script=LONG, delay=0.01)


@pytest.fixture
def server(engine: FakeEngine) -> Iterator[RunningServer]:
    with RunningServer(create_app(engine, TokenizerCacheConfig()), shutdown_timeout=1.0) as running:
        yield running


def metric(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.mark.parametrize(
    ("extra", "param"),
    [
        ({"max_tokens": "3"}, "max_tokens"),
        ({"max_tokens": True}, "max_tokens"),
        ({"max_tokens": 3.0}, "max_tokens"),
        ({"stream": "yes"}, "stream"),
        ({"stream": 1}, "stream"),
        ({"presence_penalty": 99}, "presence_penalty"),
        ({"frequency_penalty": -2.5}, "frequency_penalty"),
        ({"seed": "7"}, "seed"),
        ({"n": "1"}, "n"),
        ({"temperature": "0"}, "temperature"),
    ],
)
def test_values_openai_refuses_are_400_naming_the_field(
    server: RunningServer, extra: dict[str, Any], param: str
) -> None:
    response = httpx.post(server.url + "/v1/chat/completions", json={"messages": USER, **extra})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert isinstance(error["code"], str)


def test_values_openai_accepts_are_served(server: RunningServer) -> None:
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=30, max_retries=0)
    for extra in ({"top_p": 0}, {"top_p": 0, "temperature": 1.0, "seed": 3}, {"presence_penalty": -2.0}):
        reply = client.chat.completions.create(model="dlm:fake", messages=USER, max_tokens=2, **extra)
        assert reply.choices[0].finish_reason == "length"


@pytest.mark.parametrize("stream", [False, True])
def test_an_empty_prompt_in_a_list_is_refused_like_an_empty_string(server: RunningServer, stream: bool) -> None:
    for prompt in ("", [""]):
        response = httpx.post(server.url + "/v1/completions", json={"prompt": prompt, "stream": stream})
        assert response.status_code == 400, response.text
        assert response.json()["error"]["param"].startswith("prompt")


def test_models_retrieve_by_id(server: RunningServer) -> None:
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=30, max_retries=0)
    card = client.models.retrieve("dlm:fake")
    assert card.id == "dlm:fake" and card.object == "model"
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("dlm:absent")
    assert info.value.body["code"] == "model_not_found"  # type: ignore[index]


@pytest.mark.parametrize(("method", "path", "status"), [("GET", "/nowhere", 404), ("DELETE", "/v1/models", 405)])
def test_routing_errors_carry_a_string_code(server: RunningServer, method: str, path: str, status: int) -> None:
    response = httpx.request(method, server.url + path)
    assert response.status_code == status
    error = response.json()["error"]
    assert isinstance(error["code"], str) and error["code"]


def test_an_abandoned_stream_is_counted_in_requests_total(server: RunningServer, engine: FakeEngine) -> None:
    body = {"messages": USER, "max_tokens": 1000, "stream": True}
    with httpx.Client(timeout=30) as http:
        with http.stream("POST", server.url + "/v1/chat/completions", json=body) as response:
            lines = response.iter_lines()
            assert next(lines).startswith("data: ")
    series = 'dlm_requests_total{endpoint="/v1/chat/completions",status="499"}'
    deadline = time.monotonic() + 10
    while metric(httpx.get(server.url + "/metrics").text, series) != 1:
        assert time.monotonic() < deadline, "the abandoned stream was never counted"
        time.sleep(0.05)

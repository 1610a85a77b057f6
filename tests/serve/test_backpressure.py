"""Cancellation, the bounded queue, shutdown and shaped errors, over real HTTP (httpx and
the openai client) against the app with the real SmolLM2 tokenizer and a slow
scripted engine standing in for the model."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_engine import FakeEngine
from openai import OpenAI

from dlm.serve.app import create_app
from dlm.serve.catalog import Catalog, ServedModel
from dlm.serve.server import RunningServer
from dlm.serve.tokcache import TokenizerCacheConfig

LONG = " ".join(f"word{i}" for i in range(400))  # ~1,200 ids
STEP = 0.02  # seconds per fake decoding step: the long reply would take ~25 s
CHAT = {"messages": [{"role": "user", "content": "go"}], "max_tokens": 2000}


def metric(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


@pytest.fixture
def slow(smollm2_tokenizer: Any) -> FakeEngine:
    return FakeEngine(smollm2_tokenizer, script=LONG, delay=STEP)


@pytest.fixture
def server(slow: FakeEngine) -> Iterator[RunningServer]:
    with RunningServer(create_app(slow, TokenizerCacheConfig(), max_queue=1), shutdown_timeout=1.0) as running:
        yield running


def assert_generation_stopped(engine: FakeEngine) -> None:
    """No id is yielded any more: the cancelled generation ended within a step or two."""
    wait_until(lambda: engine.active == 0, timeout=2.0)
    before = engine.yielded
    time.sleep(10 * STEP)
    assert engine.yielded == before


def test_closing_a_stream_stops_its_generation(server: RunningServer, slow: FakeEngine) -> None:
    client = OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=30, max_retries=0)
    stream = client.chat.completions.create(model="dlm:fake", stream=True, **CHAT)
    for _, _chunk in zip(range(3), stream, strict=False):
        pass
    stream.close()
    assert_generation_stopped(slow)
    assert slow.yielded < 200  # far from the ~1,200 ids of the whole reply
    started = time.monotonic()
    quick = client.chat.completions.create(model="dlm:fake", messages=CHAT["messages"], max_tokens=2)
    assert quick.choices[0].finish_reason == "length"
    assert time.monotonic() - started < 5  # the abandoned reply no longer holds the model
    text = httpx.get(server.url + "/metrics").text
    assert metric(text, 'dlm_generation_requests_total{outcome="client_disconnected"}') == 1


def test_a_client_timing_out_stops_its_generation(server: RunningServer, slow: FakeEngine) -> None:
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/v1/chat/completions", json=CHAT, timeout=0.5)
    assert_generation_stopped(slow)
    assert slow.yielded < 200
    text = httpx.get(server.url + "/metrics").text
    assert metric(text, 'dlm_generation_requests_total{outcome="client_disconnected"}') == 1


def test_a_full_queue_answers_503_with_retry_after(server: RunningServer, slow: FakeEngine) -> None:
    results: list[int] = []

    def ask() -> None:
        results.append(
            httpx.post(server.url + "/v1/chat/completions", json={**CHAT, "max_tokens": 40}, timeout=30).status_code
        )

    running = threading.Thread(target=ask)
    running.start()
    wait_until(lambda: slow.active == 1)
    waiting = threading.Thread(target=ask)
    waiting.start()
    wait_until(lambda: "dlm_generation_queue_waiting 1.0" in httpx.get(server.url + "/metrics").text)
    refused = httpx.post(server.url + "/v1/chat/completions", json=CHAT)
    assert refused.status_code == 503
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["code"] == "queue_full"
    running.join(30)
    waiting.join(30)
    assert results == [200, 200]
    assert slow.max_active == 1
    text = httpx.get(server.url + "/metrics").text
    assert metric(text, 'dlm_generation_requests_total{outcome="queue_full"}') == 1
    assert metric(text, 'dlm_generation_requests_total{outcome="finished"}') == 2


def test_stopping_refuses_queued_work_and_cancels_in_flight_work_within_the_grace_period(
    smollm2_tokenizer: Any,
) -> None:
    slow = FakeEngine(smollm2_tokenizer, script=LONG, delay=STEP)
    app = create_app(slow, TokenizerCacheConfig(), max_queue=4)
    running = RunningServer(app, shutdown_timeout=1.0)
    statuses: list[Any] = []

    def ask() -> None:
        try:
            statuses.append(httpx.post(running.url + "/v1/chat/completions", json=CHAT, timeout=30).status_code)
        except httpx.HTTPError as exc:
            statuses.append(type(exc).__name__)

    threads = [threading.Thread(target=ask) for _ in range(3)]
    threads[0].start()
    wait_until(lambda: slow.active == 1)
    for t in threads[1:]:
        t.start()
    wait_until(lambda: app.state.generation.waiting == 2)
    started = time.monotonic()
    running.stop(timeout=10)
    assert time.monotonic() - started < 5  # 1 s grace period, then cancelled
    for t in threads:
        t.join(10)
    assert sorted(map(str, statuses)).count("503") == 2  # the queued ones
    assert_generation_stopped(slow)
    assert slow.yielded < 200
    outcomes = app.state.metrics.generations
    assert outcomes.labels("shutting_down")._value.get() == 2
    assert outcomes.labels("shutdown")._value.get() == 1


class BrokenCatalog(Catalog):
    """A catalog with a bug: looking a model up raises."""

    def resolve(self, requested: str | None) -> ServedModel | None:
        raise RuntimeError("a bug")


def test_an_unexpected_failure_is_a_shaped_500_counted_and_logged_once(
    smollm2_tokenizer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with (
        RunningServer(
            create_app(FakeEngine(smollm2_tokenizer), catalog=BrokenCatalog([ServedModel("dlm:fake")]))
        ) as running,
        httpx.Client(base_url=running.url, timeout=30) as http,
        caplog.at_level(logging.ERROR, logger="dlm.serve"),
    ):
        response = http.post("/v1/chat/completions", json=CHAT)
        assert response.status_code == 500
        assert response.json()["error"]["type"] == "server_error"
        assert "a bug" not in response.text  # no internals to the client
        assert response.headers.get("connection") != "close"
        assert http.get("/health").status_code == 200  # the same connection still serves
        text = http.get("/metrics").text
    assert metric(text, "dlm_unexpected_errors_total") == 1
    assert metric(text, 'dlm_requests_total{endpoint="/v1/chat/completions",status="500"}') == 1
    logged = [r for r in caplog.records if "unexpected error" in r.getMessage()]
    assert len(logged) == 1 and logged[0].exc_info is not None


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b'{"messages": [{"role": "user", "content": "a\\ud800b"}]}', "messages.0.content"),
        (b'{"messages": [{"role": "user", "content": "x"}], "stop": ["\\udfff"]}', "stop.0"),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": NaN}', "temperature"),
        (b'{"messages": [{"role": "user", "content": "x"}], "temperature": 1e309}', "temperature"),
        (b'{"messages": [{"role": "user", "content": "x"}], "top_p": -0.1}', "top_p"),
        (b'{"messages": [{"role": "user", "content": "x"}], "seed": 1e30}', "seed"),
        (b'{"messages": [{"role": "user", "content": "x"}], "seed": 36893488147419103232}', "seed"),
        (b'{"messages": [{"role": "user", "content": "x"}], "stop": ["a", "b", "c", "d", "e"]}', "stop"),
        (b'{"messages": [{"role": "user", "content": "x"}], "stop": [""]}', "stop"),
        (b'{"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}}', None),
        (b'{"messages": [{"role": "user", "content": "x"}], "n": 2}', "n"),
        (b'{"prompt": "\\ud83d"}', "prompt"),
    ],
)
def test_refused_inputs_are_4xx_naming_the_field(server: RunningServer, body: bytes, param: str | None) -> None:
    path = "/tokenize" if b'"prompt"' in body else "/v1/chat/completions"
    response = httpx.post(server.url + path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    if param is not None:
        assert error["param"] == param
    else:
        assert "stream_options" in error["message"]
    text = httpx.get(server.url + "/metrics").text
    assert metric(text, f'dlm_requests_total{{endpoint="{path}",status="400"}}') == 1

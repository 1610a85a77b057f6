"""OpenAI semantics over real HTTP with the official `openai` client: stop strings,
finish reasons and usage from the ids generated, include_usage, roles, model names,
/v1/completions. The real SmolLM2 tokenizer; a scripted engine stands in for the model."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from fake_engine import SYSTEM, FakeEngine
from openai import OpenAI

from dlm.serve.app import create_app
from dlm.serve.server import RunningServer
from dlm.serve.tokcache import TokenizerCacheConfig

CACHE = TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)
SCRIPT = "Line one\nLine two\nLine three"
USER = [{"role": "user", "content": "Say three lines."}]


@pytest.fixture
def engine(smollm2_tokenizer: Any) -> FakeEngine:
    return FakeEngine(smollm2_tokenizer, script=SCRIPT)


@pytest.fixture
def server(engine: FakeEngine) -> Iterator[RunningServer]:
    with RunningServer(create_app(engine, CACHE)) as running:
        yield running


@pytest.fixture
def client(server: RunningServer) -> OpenAI:
    return OpenAI(base_url=server.url + "/v1", api_key="unused", timeout=30, max_retries=0)


def stream_text(client: OpenAI, **kwargs: Any) -> tuple[str, list[Any]]:
    chunks = list(client.chat.completions.create(model="dlm:fake", messages=USER, stream=True, **kwargs))
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices), chunks


@pytest.mark.parametrize(
    ("stop", "want"),
    [
        ("\n", "Line one"),
        (["zzz", "\nLine t"], "Line one"),
        (["ne tw"], "Line one\nLi"),  # spans id boundaries ("Line", " two")
        (["three"], "Line one\nLine two\nLine "),
        (["absent"], SCRIPT),
    ],
)
def test_stop_strings_end_the_reply_and_are_not_shown(client: OpenAI, stop: Any, want: str) -> None:
    reply = client.chat.completions.create(model="dlm:fake", messages=USER, stop=stop, max_tokens=64)
    assert reply.choices[0].message.content == want
    assert reply.choices[0].finish_reason == "stop"
    streamed, chunks = stream_text(client, stop=stop, max_tokens=64)
    assert streamed == want
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_a_stopped_reply_counts_only_the_ids_generated(client: OpenAI, smollm2_tokenizer: Any) -> None:
    reply = client.chat.completions.create(model="dlm:fake", messages=USER, stop="\n", max_tokens=64)
    ids = smollm2_tokenizer.encode(SCRIPT, add_special_tokens=False)
    # generation stops at the id completing "\n": ids up to and including it
    n_until_newline = next(i + 1 for i in range(len(ids)) if "\n" in smollm2_tokenizer.decode(ids[: i + 1]))
    assert reply.usage.completion_tokens == n_until_newline


def test_finish_reason_is_length_exactly_when_max_tokens_ended_the_reply(
    client: OpenAI, smollm2_tokenizer: Any
) -> None:
    n_script = len(smollm2_tokenizer.encode(SCRIPT, add_special_tokens=False))
    for max_tokens in (1, 6, 7, 8, n_script):  # EOS not reached yet
        reply = client.chat.completions.create(model="dlm:fake", messages=USER, max_tokens=max_tokens)
        assert reply.choices[0].finish_reason == "length", max_tokens
        assert reply.usage.completion_tokens == max_tokens
        _, chunks = stream_text(client, max_tokens=max_tokens)
        assert chunks[-1].choices[0].finish_reason == "length"
    for max_tokens in (n_script + 1, n_script + 5):  # the EOS id fits: the model ended it
        reply = client.chat.completions.create(model="dlm:fake", messages=USER, max_tokens=max_tokens)
        assert reply.choices[0].finish_reason == "stop"
        assert reply.usage.completion_tokens == n_script + 1
        assert reply.choices[0].message.content == SCRIPT


def test_stream_usage_chunk_comes_last_with_empty_choices(client: OpenAI) -> None:
    _, chunks = stream_text(client, max_tokens=5, stream_options={"include_usage": True})
    final = chunks[-1]
    assert final.choices == []
    assert final.usage.completion_tokens == 5
    assert final.usage.total_tokens == final.usage.prompt_tokens + 5
    assert all(c.usage is None for c in chunks[:-1])
    _, plain = stream_text(client, max_tokens=5)
    assert all(c.choices for c in plain)  # no usage chunk unless asked


def test_seed_and_sampling_reach_the_engine(client: OpenAI, engine: FakeEngine) -> None:
    client.chat.completions.create(model="dlm:fake", messages=USER, seed=7, temperature=0.5, top_p=0.9)
    sampling = engine.calls[-1][2]
    assert (sampling.seed, sampling.temperature, sampling.top_p) == (7, 0.5, 0.9)


def test_wrong_model_is_404_in_openai_shape(client: OpenAI, server: RunningServer) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client.chat.completions.create(model="gpt-4o", messages=USER)
    error = info.value.body
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "gpt-4o" in error["message"] and "dlm:fake" in error["message"]
    body = httpx.post(server.url + "/v1/completions", json={"model": "x", "prompt": "hi"}).json()
    assert set(body["error"]) == {"message", "type", "param", "code"}


def test_developer_role_is_the_system_message(client: OpenAI, engine: FakeEngine, smollm2_tokenizer: Any) -> None:
    messages = [{"role": "developer", "content": "Be terse."}, *USER]
    client.chat.completions.create(model="dlm:fake", messages=messages, max_tokens=2)
    rendered = smollm2_tokenizer.apply_chat_template(
        [{"role": "system", "content": "Be terse."}, *USER], tokenize=False, add_generation_prompt=True
    )
    assert engine.calls[-1][0] == smollm2_tokenizer.encode(rendered, add_special_tokens=False)
    assert SYSTEM not in smollm2_tokenizer.decode(engine.calls[-1][0])


def test_tool_role_is_rendered_and_null_content_is_refused_by_name(
    client: OpenAI, server: RunningServer, engine: FakeEngine, smollm2_tokenizer: Any
) -> None:
    messages = [
        *USER,
        {"role": "assistant", "content": "calling"},
        {"role": "tool", "content": "42", "tool_call_id": "c1"},
    ]
    client.chat.completions.create(model="dlm:fake", messages=messages, max_tokens=2)
    assert "<|im_start|>tool\n42<|im_end|>" in smollm2_tokenizer.decode(engine.calls[-1][0])
    null = [*USER, {"role": "assistant", "content": None}]
    response = httpx.post(server.url + "/v1/chat/completions", json={"messages": null})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "messages.1.content"


def test_completions_endpoint_for_plain_prompts(client: OpenAI, engine: FakeEngine, smollm2_tokenizer: Any) -> None:
    reply = client.completions.create(model="dlm:fake", prompt="Once upon a time", max_tokens=64, stop=["\n"])
    assert reply.object == "text_completion"
    assert reply.choices[0].text == "Line one"
    assert reply.choices[0].finish_reason == "stop"
    assert engine.calls[-1][0] == smollm2_tokenizer.encode("Once upon a time")
    assert reply.usage.prompt_tokens == len(engine.calls[-1][0])
    chunks = list(
        client.completions.create(
            model="dlm:fake", prompt="Once", max_tokens=3, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == smollm2_tokenizer.decode(
        smollm2_tokenizer.encode(SCRIPT, add_special_tokens=False)[:3]
    )
    assert chunks[-2].choices[0].finish_reason == "length"
    assert chunks[-1].usage.completion_tokens == 3

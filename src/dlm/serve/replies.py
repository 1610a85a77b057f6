"""OpenAI response bodies built from a job's events: whole replies and SSE streams.

Both endpoints share the shape: chat completions carry `message` / `delta`
(`object` "chat.completion" / "chat.completion.chunk"); text completions carry
`text` ("text_completion" both ways). `usage` counts the prompt ids and the ids
generated (never re-tokenized text). A stream is `data: {chunk}` lines ending with
`data: [DONE]`; with `stream_options.include_usage` every chunk has `"usage": null`
and one last chunk before `[DONE]` has empty `choices` and the usage.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from dlm.serve.generation import Delta, Done, Event, GenerationFailed
from dlm.serve.guards import error_body


@dataclass(frozen=True)
class ReplyShape:
    """Which endpoint's shape, and the ids of the reply."""

    chat: bool
    completion_id: str
    model_id: str
    n_prompt: int
    include_usage: bool = False

    @property
    def created(self) -> int:
        return int(time.time())


def usage(n_prompt: int, n_completion: int) -> dict[str, int]:
    return {"prompt_tokens": n_prompt, "completion_tokens": n_completion, "total_tokens": n_prompt + n_completion}


async def collect(events: AsyncIterator[Event], shape: ReplyShape) -> tuple[int, dict[str, Any]]:
    """(status, body) of a whole reply: 200 and the completion, or 500 and the error;
    (499, {}) when the events ended without an outcome (the job was cancelled)."""
    parts = []
    async for event in events:
        if isinstance(event, Delta):
            parts.append(event.text)
        elif isinstance(event, GenerationFailed):
            return 500, error_body(event.message, kind="server_error", code="generation_failed")
        elif isinstance(event, Done):
            return 200, _whole(shape, "".join(parts), event)
    return 499, {}


def _whole(shape: ReplyShape, text: str, done: Done) -> dict[str, Any]:
    choice: dict[str, Any] = {"index": 0, "finish_reason": done.finish_reason, "logprobs": None}
    if shape.chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": shape.completion_id,
        "object": "chat.completion" if shape.chat else "text_completion",
        "created": shape.created,
        "model": shape.model_id,
        "choices": [choice],
        "usage": usage(shape.n_prompt, done.completion_tokens),
    }


async def sse(events: AsyncIterator[Event], shape: ReplyShape) -> AsyncIterator[str]:
    """The server-sent events of a streamed reply (see module docstring)."""
    created = shape.created
    kind = "chat.completion.chunk" if shape.chat else "text_completion"

    def chunk(text: str | None, finish: str | None = None, *, role: bool = False) -> str:
        choice: dict[str, Any] = {"index": 0, "finish_reason": finish, "logprobs": None}
        if shape.chat:
            delta: dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            choice["delta"] = delta
        else:
            choice["text"] = text or ""
        body: dict[str, Any] = {
            "id": shape.completion_id,
            "object": kind,
            "created": created,
            "model": shape.model_id,
            "choices": [choice],
        }
        if shape.include_usage:
            body["usage"] = None
        return f"data: {json.dumps(body)}\n\n"

    if shape.chat:
        yield chunk("", role=True)
    async for event in events:
        if isinstance(event, Delta):
            yield chunk(event.text)
        elif isinstance(event, GenerationFailed):
            yield f"data: {json.dumps(error_body(event.message, kind='server_error', code='generation_failed'))}\n\n"
            return
        elif isinstance(event, Done):
            yield chunk(None, event.finish_reason)
            if shape.include_usage:
                final = {
                    "id": shape.completion_id,
                    "object": kind,
                    "created": created,
                    "model": shape.model_id,
                    "choices": [],
                    "usage": usage(shape.n_prompt, event.completion_tokens),
                }
                yield f"data: {json.dumps(final)}\n\n"
            yield "data: [DONE]\n\n"
            return

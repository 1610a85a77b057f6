"""From a validated request to a response: the model it names, the prompt's length
check, and running the generation as a whole reply or a stream.

A request's `model` is looked up in the catalog (404 `model_not_found` naming what is
served); prompt ids plus `max_tokens` over the context get 400; a generation is
admitted to the bounded queue (503 with `Retry-After` when full or stopping), waits
its turn (a client gone while waiting ends it, 499), then runs; a client that goes
away while it runs cancels it within one decoding step.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from jinja2 import TemplateError

from dlm.serve.catalog import ServedModel
from dlm.serve.generation import Cancelled, Done, Event, QueueFull, ShuttingDown
from dlm.serve.generation import Request as GenRequest
from dlm.serve.guards import error_body
from dlm.serve.metrics import ServerMetrics
from dlm.serve.replies import ReplyShape, collect, sse
from dlm.serve.state import ServeState

RETRY_AFTER_SECONDS = 1


class TemplateRefused(Exception):
    """The chat template cannot render the conversation; `param` names the field."""

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


class ModelNotFound(Exception):
    """The request's `model` is not served; answered 404 `model_not_found`."""


def served_model(state: ServeState, requested: str | None) -> ServedModel:
    """The model `requested` names.

    Raises:
        ModelNotFound: no served model answers to it (the message lists those that do).
    """
    model = state.catalog.resolve(requested)
    if model is None:
        names = ", ".join(repr(m.id) for m in state.catalog.models())
        raise ModelNotFound(f"the model {requested!r} does not exist; this server serves {names}")
    return model


def too_long(state: ServeState, n_prompt: int, budget: int, param: str) -> JSONResponse | None:
    """A 400 when `n_prompt` ids plus `budget` exceed the context (else None)."""
    limit = state.max_model_len
    if limit is None or n_prompt + budget <= limit:
        return None
    message = (
        f"prompt ({n_prompt} tokens) plus max_tokens ({budget}) exceeds max_model_len ({limit}); "
        f"shorten the {param} or lower max_tokens"
    )
    return JSONResponse(error_body(message, param=param, code="context_length_exceeded"), status_code=400)


def room(state: ServeState, budget: int) -> int | None:
    """Prompt ids that still fit beside `budget` new ones (None: unbounded)."""
    limit = state.max_model_len
    return None if limit is None else max(limit - budget, 0)


def render_chat(
    state: ServeState, messages: list[dict[str, Any]], system_prompt: str | None, add_generation_prompt: bool = True
) -> str:
    """The conversation under the chat template.

    Raises:
        TemplateRefused: the template cannot render it (naming the likely field).
    """
    try:
        return state.generation.render(messages, system_prompt, add_generation_prompt=add_generation_prompt)
    except (TemplateError, TypeError, ValueError) as exc:  # the template's own refusal
        raise _template_refusal(messages, exc) from None


async def run_job(
    state: ServeState, request: Request, job_request: GenRequest, shape: ReplyShape, stream: bool
) -> Response:
    """Admit, wait, generate; the whole reply, or a stream (see module docstring)."""
    generation, metrics = state.generation, state.metrics
    try:
        job = generation.admit(job_request)
        await job.wait_turn(lambda: disconnected(request))
    except (QueueFull, ShuttingDown) as exc:
        full = isinstance(exc, QueueFull)
        message = (
            f"{generation.max_queue} requests already wait for the model; retry shortly"
            if full
            else "the server is shutting down"
        )
        return JSONResponse(
            error_body(message, kind="server_error", code="queue_full" if full else "shutting_down"),
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )
    except Cancelled:
        return Response(status_code=499)
    metrics.prompt_tokens.inc(len(job_request.input_ids))
    job.start()
    # Cancels the job when the client goes away, even before a streamed body is
    # first read (the response ends the watch: the server then reports a disconnect).
    watcher = asyncio.ensure_future(disconnected(request))
    watcher.add_done_callback(lambda w: None if w.cancelled() else job.cancel())
    events = _counting(job.events(), metrics)
    if stream:
        return StreamingResponse(sse(events, shape), media_type="text/event-stream")
    try:
        status, payload = await collect(events, shape)
    finally:
        watcher.cancel()
    if status == 499:
        return Response(status_code=499)
    return JSONResponse(payload, status_code=status)


async def disconnected(request: Request) -> None:
    """Return once the client has gone (its body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def _counting(events: AsyncIterator[Event], metrics: ServerMetrics) -> AsyncIterator[Event]:
    async for event in events:
        if isinstance(event, Done):
            metrics.generated_tokens.inc(event.completion_tokens)
        yield event


def _template_refusal(messages: list[dict[str, Any]], exc: Exception) -> TemplateRefused:
    """Name the field the chat template could not take (best guess: a null content,
    then a role it may not know)."""
    reason = f"{type(exc).__name__}: {exc}"
    for i, m in enumerate(messages):
        if m.get("content") is None:
            return TemplateRefused(
                f"messages.{i}.content: the chat template cannot render content null ({reason})",
                f"messages.{i}.content",
            )
    for i, m in enumerate(messages):
        if m.get("role") == "tool":
            return TemplateRefused(
                f"messages.{i}.role: the chat template cannot render role 'tool' ({reason})", f"messages.{i}.role"
            )
    return TemplateRefused(f"messages: the chat template cannot render this conversation ({reason})", "messages")

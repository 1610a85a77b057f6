"""The OpenAI-compatible FastAPI app: `create_app(engine, tokenizer_cache_config)`.

Routes:
- `POST /v1/chat/completions`: OpenAI chat completions, JSON or server-sent events;
- `POST /v1/completions`: OpenAI (legacy) completions of a plain prompt;
- `GET /v1/models`: the one model served (its id is the engine's `model_id`);
- `POST /tokenize`: vLLM's shape, `{"prompt": ...}` or `{"messages": [...]}` ->
  `{"tokens": [...], "count": n, "max_model_len": m}`, through the tokenizer cache;
- `GET /metrics`: Prometheus text (`dlm.serve.metrics`);
- `GET /health`: `{"status": "ok", "model": id}`.

A `model` other than the one served gets 404 (`model_not_found`). Prompts are
tokenized through a `CachedTokenizer` (thread-safe); a prompt too long for the
context is refused with 400 before it enters the cache. Generation runs one
request at a time behind a bounded queue (`dlm.serve.generation`): a full queue or
a stopping server answers 503 with `Retry-After`; a client that goes away stops its
generation within one decoding step. Bodies over `max_body_bytes` get 413.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Request, Response
from jinja2 import TemplateError
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from dlm.defaults import DEFAULT_MAX_QUEUE
from dlm.serve.limits import DEFAULT_BODY_TIMEOUT
from dlm.serve.generation import (
    Cancelled,
    Done,
    Engine,
    Event,
    Generation,
    QueueFull,
    ShuttingDown,
    max_model_len,
)
from dlm.serve.generation import Request as GenRequest
from dlm.serve.guards import GuardMiddleware, error_body, install_error_handlers
from dlm.serve.metrics import CONTENT_TYPE, ServerMetrics
from dlm.serve.replies import ReplyShape, collect, sse
from dlm.serve.schemas import ChatCompletionRequest, CompletionRequest, TokenizeRequest
from dlm.serve.tokcache import CachedTokenizer, TokenizerCacheConfig

DEFAULT_MAX_BODY_BYTES = 1 << 20
RETRY_AFTER_SECONDS = 1


class TemplateRefused(Exception):
    """The chat template cannot render the conversation; `param` names the field."""

    def __init__(self, message: str, param: str):
        super().__init__(message)
        self.param = param


def create_app(
    engine: Engine,
    tokenizer_cache_config: TokenizerCacheConfig | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    context_len: int | None = None,
    max_queue: int = DEFAULT_MAX_QUEUE,
    cached: CachedTokenizer | None = None,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
) -> FastAPI:
    """Build the app serving `engine`.

    Args:
        engine: the loaded model (`Engine`; `dlm.serve.decode.TorchEngine` fits).
        tokenizer_cache_config: cache levels and sizes (default: both off).
        max_body_bytes: request bodies over this size get 413.
        context_len: `max_model_len` in tokens; default from the engine / model config.
        max_queue: generation requests that may wait while one runs; more get 503.
        cached: an already built (e.g. pre-filled) cache over `engine.tokenizer`;
            `tokenizer_cache_config` is then ignored.

    Raises:
        TokenizerCacheConfigError: invalid cache configuration.
    """
    if cached is None:
        cached = CachedTokenizer(engine.tokenizer, tokenizer_cache_config)
    cache = cached
    app = FastAPI(title="dlm serve", docs_url=None, redoc_url=None, openapi_url=None)
    metrics = ServerMetrics(cache)
    generation = Generation(
        engine, cache, max_queue=max_queue, on_event=lambda outcome: metrics.generations.labels(outcome).inc()
    )
    metrics.watch_queue(lambda: (generation.waiting, int(generation.running)))
    limit = context_len or max_model_len(engine)
    app.state.cached_tokenizer = cache
    app.state.metrics = metrics
    app.state.generation = generation
    app.add_middleware(GuardMiddleware, max_body_bytes=max_body_bytes, body_timeout=body_timeout, metrics=metrics)
    install_error_handlers(app)

    def wrong_model(name: str | None) -> JSONResponse | None:
        if name is None or name == engine.model_id:
            return None
        message = f"the model {name!r} does not exist; this server serves {engine.model_id!r}"
        return JSONResponse(error_body(message, param="model", code="model_not_found"), status_code=404)

    def too_long(n_prompt: int, budget: int, param: str) -> JSONResponse | None:
        if limit is None or n_prompt + budget <= limit:
            return None
        message = (
            f"prompt ({n_prompt} tokens) plus max_tokens ({budget}) exceeds max_model_len ({limit}); "
            f"shorten the {param} or lower max_tokens"
        )
        return JSONResponse(error_body(message, param=param, code="context_length_exceeded"), status_code=400)

    def room(budget: int) -> int | None:
        return None if limit is None else max(limit - budget, 0)

    def render_chat(messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
        try:
            return generation.render(messages, add_generation_prompt=add_generation_prompt)
        except (TemplateError, TypeError, ValueError) as exc:  # the template's own refusal
            raise _template_refusal(messages, exc) from None

    @app.exception_handler(TemplateRefused)
    async def _refused(_: Request, exc: TemplateRefused) -> JSONResponse:
        return JSONResponse(error_body(str(exc), param=exc.param, code="invalid_value"), status_code=400)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": engine.model_id}

    card = {"id": engine.model_id, "object": "model", "created": 0, "owned_by": "dlm", "max_model_len": limit}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [card]}

    @app.get("/v1/models/{model_id:path}", response_model=None)
    async def model(model_id: str) -> Any:
        return wrong_model(model_id) or card

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/tokenize", response_model=None)
    async def tokenize(body: TokenizeRequest) -> Any:
        if (refusal := wrong_model(body.model)) is not None:
            return refusal
        if body.messages is not None:
            messages = [m.as_template_dict() for m in body.messages]
            text = await run_in_threadpool(render_chat, messages, body.add_generation_prompt)
            ids = await run_in_threadpool(cache.encode, text, add_special_tokens=False, max_cached_ids=limit)
        else:
            special = True if body.add_special_tokens is None else body.add_special_tokens
            ids = await run_in_threadpool(cache.encode, body.prompt, add_special_tokens=special, max_cached_ids=limit)
        return {"tokens": ids, "count": len(ids), "max_model_len": limit}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(request: Request, body: ChatCompletionRequest) -> Response:
        if (refusal := wrong_model(body.model)) is not None:
            return refusal
        text = await run_in_threadpool(render_chat, body.message_dicts())
        ids = await run_in_threadpool(
            cache.encode, text, add_special_tokens=False, max_cached_ids=room(body.new_tokens)
        )
        if (refusal := too_long(len(ids), body.new_tokens, "messages")) is not None:
            return refusal
        shape = ReplyShape(True, f"chatcmpl-{uuid.uuid4().hex}", engine.model_id, len(ids), body.include_usage)
        job = GenRequest(ids, body.new_tokens, body.sampling, tuple(body.stop or ()))
        return await run_job(request, job, shape, body.stream)

    @app.post("/v1/completions", response_model=None)
    async def completions(request: Request, body: CompletionRequest) -> Response:
        if (refusal := wrong_model(body.model)) is not None:
            return refusal
        ids = await run_in_threadpool(
            cache.encode, body.text, add_special_tokens=True, max_cached_ids=room(body.new_tokens)
        )
        if (refusal := too_long(len(ids), body.new_tokens, "prompt")) is not None:
            return refusal
        shape = ReplyShape(False, f"cmpl-{uuid.uuid4().hex}", engine.model_id, len(ids), body.include_usage)
        job = GenRequest(ids, body.new_tokens, body.sampling, tuple(body.stop or ()))
        return await run_job(request, job, shape, body.stream)

    async def run_job(request: Request, job_request: GenRequest, shape: ReplyShape, stream: bool) -> Response:
        try:
            job = generation.admit(job_request)
            await job.wait_turn(lambda: _disconnected(request))
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
        watcher = asyncio.ensure_future(_disconnected(request))
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

    return app


async def _counting(events: AsyncIterator[Event], metrics: ServerMetrics) -> AsyncIterator[Event]:
    async for event in events:
        if isinstance(event, Done):
            metrics.generated_tokens.inc(event.completion_tokens)
        yield event


async def _disconnected(request: Request) -> None:
    """Return once the client has gone (its body has been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


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


"""The OpenAI-compatible FastAPI app: `create_app(engine, tokenizer_cache_config)`.

Routes:
- `POST /v1/chat/completions`: OpenAI chat completions, JSON or server-sent events
  (`stream: true`: `data: {chunk}` lines, then `data: [DONE]`);
- `GET /v1/models`: the one model served (its id is the engine's `model_id`);
- `POST /tokenize`: vLLM's shape, `{"prompt": ...}` or `{"messages": [...]}` ->
  `{"tokens": [...], "count": n, "max_model_len": m}`, through the tokenizer cache;
- `GET /metrics`: Prometheus text (`dlm.serve.metrics`);
- `GET /health`: `{"status": "ok", "model": id}`.

Prompts are tokenized through a `CachedTokenizer` (thread-safe); generation runs one
request at a time (`dlm.serve.generation`). Bodies over `max_body_bytes` get 413.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse

from dlm.serve.generation import Engine, Generation, GenerationFailed, max_model_len
from dlm.serve.guards import GuardMiddleware, error_body, install_error_handlers
from dlm.serve.metrics import CONTENT_TYPE, ServerMetrics
from dlm.serve.schemas import ChatCompletionRequest, TokenizeRequest
from dlm.serve.tokcache import CachedTokenizer, TokenizerCacheConfig

DEFAULT_MAX_BODY_BYTES = 1 << 20


def create_app(
    engine: Engine,
    tokenizer_cache_config: TokenizerCacheConfig | None = None,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    context_len: int | None = None,
) -> FastAPI:
    """Build the app serving `engine`.

    Args:
        engine: the loaded model (`Engine`; `dlm.infer.InferenceModel` fits).
        tokenizer_cache_config: cache levels and sizes (default: both off).
        max_body_bytes: request bodies over this size get 413.
        context_len: `max_model_len` in tokens; default from the engine / model config.

    Raises:
        TokenizerCacheConfigError: invalid cache configuration.
    """
    cached = CachedTokenizer(engine.tokenizer, tokenizer_cache_config)
    generation = Generation(engine, cached)
    metrics = ServerMetrics(cached)
    limit = context_len or max_model_len(engine)
    app = FastAPI(title="dlm serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.cached_tokenizer = cached
    app.state.metrics = metrics
    app.add_middleware(GuardMiddleware, max_body_bytes=max_body_bytes, metrics=metrics)
    install_error_handlers(app)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": engine.model_id}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        card = {
            "id": engine.model_id,
            "object": "model",
            "created": 0,
            "owned_by": "dlm",
            "max_model_len": limit,
        }
        return {"object": "list", "data": [card]}

    @app.get("/metrics")
    async def prometheus() -> Response:
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    @app.post("/tokenize")
    async def tokenize(body: TokenizeRequest) -> dict[str, Any]:
        if body.messages is not None:
            messages = [m.model_dump() for m in body.messages]
            ids = await run_in_threadpool(
                generation.prompt_ids, messages, add_generation_prompt=body.add_generation_prompt
            )
        else:
            special = True if body.add_special_tokens is None else body.add_special_tokens
            ids = await run_in_threadpool(cached.encode, body.prompt, add_special_tokens=special)
        return {"tokens": ids, "count": len(ids), "max_model_len": limit}

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(body: ChatCompletionRequest) -> Response:
        messages = body.message_dicts()
        ids = await run_in_threadpool(generation.prompt_ids, messages)
        if limit is not None and len(ids) + body.new_tokens > limit:
            message = (
                f"prompt ({len(ids)} tokens) plus max_tokens ({body.new_tokens}) exceeds "
                f"max_model_len ({limit}); shorten the conversation or lower max_tokens"
            )
            return JSONResponse(
                error_body(message, param="messages", code="context_length_exceeded"), status_code=400
            )
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        pieces = generation.stream(
            messages, ids, max_new_tokens=body.new_tokens, temperature=body.temperature
        )
        if body.stream:
            events = _sse(pieces, completion_id, engine.model_id, generation, body.new_tokens, metrics)
            return StreamingResponse(events, media_type="text/event-stream")
        return await _complete(
            pieces, completion_id, engine.model_id, generation, len(ids), body.new_tokens, metrics
        )

    return app


def _finish_reason(n_tokens: int, budget: int) -> str:
    return "length" if n_tokens >= budget else "stop"


async def _complete(
    pieces: AsyncIterator[str | GenerationFailed],
    completion_id: str,
    model_id: str,
    generation: Generation,
    n_prompt: int,
    budget: int,
    metrics: ServerMetrics,
) -> JSONResponse:
    parts = []
    async for piece in pieces:
        if isinstance(piece, GenerationFailed):
            return JSONResponse(error_body(piece.message, kind="server_error"), status_code=500)
        parts.append(piece)
    text = "".join(parts)
    n_out = generation.count_tokens(text)
    metrics.generated_tokens.inc(n_out)
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "finish_reason": _finish_reason(n_out, budget),
        "logprobs": None,
    }
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_id,
            "choices": [choice],
            "usage": {
                "prompt_tokens": n_prompt,
                "completion_tokens": n_out,
                "total_tokens": n_prompt + n_out,
            },
        }
    )


async def _sse(
    pieces: AsyncIterator[str | GenerationFailed],
    completion_id: str,
    model_id: str,
    generation: Generation,
    budget: int,
    metrics: ServerMetrics,
) -> AsyncIterator[str]:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        body = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model_id,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }
        return f"data: {json.dumps(body)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    parts = []
    async for piece in pieces:
        if isinstance(piece, GenerationFailed):
            yield f"data: {json.dumps(error_body(piece.message, kind='server_error'))}\n\n"
            return
        if piece:
            parts.append(piece)
            yield chunk({"content": piece})
    n_out = generation.count_tokens("".join(parts))
    metrics.generated_tokens.inc(n_out)
    yield chunk({}, _finish_reason(n_out, budget))
    yield "data: [DONE]\n\n"

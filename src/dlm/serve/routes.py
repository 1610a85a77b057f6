"""The OpenAI-compatible routes, one function each, over the app's `ServeState`.

- `POST /v1/chat/completions`: OpenAI chat completions, JSON or server-sent events;
- `POST /v1/completions`: OpenAI (legacy) completions of a plain prompt;
- `GET /v1/models`: every served model (each document, then the base model alone),
  with its adapter version; `GET /v1/models/{id}`: one of them;
- `POST /tokenize`: vLLM's shape, `{"prompt": ...}` or `{"messages": [...]}` ->
  `{"tokens": [...], "count": n, "max_model_len": m}`, through the tokenizer cache;
- `GET /metrics`: Prometheus text (`dlm.serve.metrics`);
- `GET /health`: `{"status": "ok", "model": <the default model's id>}`; while reloading
  a document's adapter fails, `"status": "degraded"` and `"reload_failures"`: model id
  -> the failure's line (still HTTP 200: every model still answers, with its last good
  adapter; `dlm.serve.reload`).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.concurrency import run_in_threadpool

from dlm.serve.generation import Request as GenRequest
from dlm.serve.jobs import render_chat, room, run_job, served_model, too_long
from dlm.serve.metrics import CONTENT_TYPE
from dlm.serve.replies import ReplyShape
from dlm.serve.schemas import ChatCompletionRequest, CompletionRequest, TokenizeRequest
from dlm.serve.state import ServeState, serve_state

router = APIRouter()
State = Annotated[ServeState, Depends(serve_state)]


@router.get("/health")
async def health(state: State) -> dict[str, Any]:
    failing = state.reloads.failing()
    body: dict[str, Any] = {"status": "degraded" if failing else "ok", "model": state.catalog.models()[0].id}
    if failing:
        body["reload_failures"] = failing
    return body


@router.get("/v1/models")
async def list_models(state: State) -> dict[str, Any]:
    return {"object": "list", "data": state.cards()}


@router.get("/v1/models/{model_id:path}")
async def retrieve_model(model_id: str, state: State) -> dict[str, Any]:
    return state.card(served_model(state, model_id))


@router.get("/metrics")
async def prometheus(state: State) -> Response:
    return Response(state.metrics.render(), media_type=CONTENT_TYPE)


@router.post("/tokenize")
async def tokenize(body: TokenizeRequest, state: State) -> dict[str, Any]:
    model, limit = served_model(state, body.model), state.max_model_len
    if body.messages is not None:
        messages = [m.as_template_dict() for m in body.messages]
        text = await run_in_threadpool(render_chat, state, messages, model.system_prompt, body.add_generation_prompt)
        ids = await run_in_threadpool(state.cached.encode, text, add_special_tokens=False, max_cached_ids=limit)
    else:
        special = True if body.add_special_tokens is None else body.add_special_tokens
        ids = await run_in_threadpool(
            state.cached.encode, body.prompt, add_special_tokens=special, max_cached_ids=limit
        )
    return {"tokens": ids, "count": len(ids), "max_model_len": limit}


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(request: Request, body: ChatCompletionRequest, state: State) -> Response:
    model = served_model(state, body.model)
    text = await run_in_threadpool(render_chat, state, body.message_dicts(), model.system_prompt)
    ids = await run_in_threadpool(
        state.cached.encode, text, add_special_tokens=False, max_cached_ids=room(state, body.new_tokens)
    )
    if (refusal := too_long(state, len(ids), body.new_tokens, "messages")) is not None:
        return refusal
    shape = ReplyShape(True, f"chatcmpl-{uuid.uuid4().hex}", model.id, len(ids), body.include_usage)
    job = GenRequest(model.id, ids, body.new_tokens, body.sampling, tuple(body.stop or ()))
    return await run_job(state, request, job, shape, body.stream)


@router.post("/v1/completions", response_model=None)
async def completions(request: Request, body: CompletionRequest, state: State) -> Response:
    model = served_model(state, body.model)
    ids = await run_in_threadpool(
        state.cached.encode, body.text, add_special_tokens=True, max_cached_ids=room(state, body.new_tokens)
    )
    if (refusal := too_long(state, len(ids), body.new_tokens, "prompt")) is not None:
        return refusal
    shape = ReplyShape(False, f"cmpl-{uuid.uuid4().hex}", model.id, len(ids), body.include_usage)
    job = GenRequest(model.id, ids, body.new_tokens, body.sampling, tuple(body.stop or ()))
    return await run_job(state, request, job, shape, body.stream)

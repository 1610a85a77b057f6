"""The OpenAI-compatible FastAPI app: `create_app(engine, ...)` -> `ServeApp`.

The routes are `dlm.serve.routes` (one function each), sharing a typed `ServeState`;
request guards and error shapes are `dlm.serve.guards`. Prompts are tokenized
through one `CachedTokenizer` (thread-safe; every served model shares the base
model's tokenizer); a prompt too long for the context is refused with 400 before it
enters the cache. Generation runs one request at a time behind a bounded queue
(`dlm.serve.generation`). Bodies over `max_body_bytes` get 413, bodies slower than
`body_timeout` 408.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from dlm.defaults import DEFAULT_MAX_QUEUE
from dlm.serve.catalog import Catalog, ServedModel
from dlm.serve.generation import Engine, Generation, max_model_len
from dlm.serve.guards import GuardMiddleware, error_body, install_error_handlers
from dlm.serve.jobs import ModelNotFound, TemplateRefused
from dlm.serve.limits import DEFAULT_BODY_TIMEOUT
from dlm.serve.metrics import ServerMetrics
from dlm.serve.routes import router
from dlm.serve.state import ServeState
from dlm.serve.tokcache import CachedTokenizer, TokenizerCacheConfig

DEFAULT_MAX_BODY_BYTES = 1 << 20


@dataclass(frozen=True)
class ServeApp:
    """An app and its state (the caller reads the state here, never from `app.state`)."""

    app: FastAPI
    state: ServeState


def create_app(
    engine: Engine,
    tokenizer_cache_config: TokenizerCacheConfig | None = None,
    *,
    catalog: Catalog | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    context_len: int | None = None,
    max_queue: int = DEFAULT_MAX_QUEUE,
    cached: CachedTokenizer | None = None,
) -> ServeApp:
    """Build the app serving `engine`.

    Args:
        engine: the loaded model (`Engine`; `dlm.infer.decode.TorchEngine` fits).
        tokenizer_cache_config: cache levels and sizes (default: both off).
        catalog: the models served; default: one, `engine.model_id` with
            `engine.system_prompt`, generating with whatever the engine holds.
        max_body_bytes: request bodies over this size get 413.
        body_timeout: seconds a request body may take to arrive (then 408).
        context_len: `max_model_len` in tokens; default from the engine / model config.
        max_queue: generation requests that may wait while one runs; more get 503.
        cached: an already built (e.g. pre-filled) cache over `engine.tokenizer`;
            `tokenizer_cache_config` is then ignored.

    Raises:
        TokenizerCacheConfigError: invalid cache configuration.
    """
    if cached is None:
        cached = CachedTokenizer(engine.tokenizer, tokenizer_cache_config)
    if catalog is None:
        model_id = str(getattr(engine, "model_id", "model"))
        catalog = Catalog([ServedModel(model_id, getattr(engine, "system_prompt", None))])
    metrics = ServerMetrics(cached)
    generation = Generation(
        engine, catalog, max_queue=max_queue, on_event=lambda outcome: metrics.generations.labels(outcome).inc()
    )
    metrics.watch_queue(lambda: (generation.waiting, int(generation.running)))
    state = ServeState(engine, catalog, cached, generation, metrics, context_len or max_model_len(engine))
    metrics.watch_reloads(state.reloads, lambda: [m.id for m in catalog.models() if m.adapter is not None])
    app = FastAPI(title="dlm serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.serve = state
    app.add_middleware(GuardMiddleware, max_body_bytes=max_body_bytes, body_timeout=body_timeout, metrics=metrics)
    install_error_handlers(app)
    app.add_exception_handler(TemplateRefused, _template_refused)
    app.add_exception_handler(ModelNotFound, _model_not_found)
    app.include_router(router)
    return ServeApp(app, state)


async def _template_refused(_: Request, exc: Exception) -> JSONResponse:
    param = exc.param if isinstance(exc, TemplateRefused) else None
    return JSONResponse(error_body(str(exc), param=param, code="invalid_value"), status_code=400)


async def _model_not_found(_: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(error_body(str(exc), param="model", code="model_not_found"), status_code=404)

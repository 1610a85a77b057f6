"""Request guards: a body-size limit, per-request metrics, and errors in OpenAI's shape.

Every error response is `{"error": {"message", "type", "param", "code"}}` with:
400 for a body that is not JSON, 413 for a body over the limit, 422 for fields that
fail validation (the message names each field), 404/405 from routing, 500 when
generation fails before the reply started.

An unexpected exception (a bug) is answered with a shaped 500 whose message gives
no internals, counted in `dlm_unexpected_errors_total` and logged once with its
traceback on the `dlm.serve` logger; the response is complete, so the client's
keep-alive connection stays usable. When a streamed reply had already started, the
stream ends instead (counted and logged the same way).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dlm.serve.metrics import ServerMetrics

KNOWN_ENDPOINTS = frozenset(
    {"/v1/chat/completions", "/v1/completions", "/v1/models", "/tokenize", "/metrics", "/health"}
)
log = logging.getLogger("dlm.serve")


def error_body(
    message: str, *, kind: str = "invalid_request_error", param: str | None = None, code: Any = None
) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class _TooLarge(StarletteHTTPException):
    """Raised while reading a body past the limit; FastAPI passes HTTP exceptions through
    its body parsing, so the app's handler answers 413."""

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=f"request body over {limit} bytes")


class GuardMiddleware:
    """Pure ASGI middleware: refuses bodies over `max_body_bytes` with 413 (by the
    Content-Length header, or while reading a chunked body) and records each HTTP
    request's status and latency (until the last body byte is sent) in `metrics`."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, metrics: ServerMetrics):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        endpoint = path if path in KNOWN_ENDPOINTS else "other"
        started = time.perf_counter()
        state = {"status": 500, "started": False}

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.metrics.observe(endpoint, int(state["status"]), time.perf_counter() - started)

        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(tracked_send)
            return
        received = 0

        async def limited_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _TooLarge(self.max_body_bytes)
            return message

        try:
            await self.app(scope, limited_receive, tracked_send)
        except _TooLarge:
            if not state["started"]:
                await self._too_large(tracked_send)
        except Exception:
            self.metrics.unexpected_errors.inc()
            log.exception("unexpected error serving %s %s", scope.get("method"), path)
            if not state["started"]:
                response = JSONResponse(
                    error_body("internal server error; the server log has the details", kind="server_error"),
                    status_code=500,
                )
                await response({"type": "http"}, _no_receive, tracked_send)

    async def _too_large(self, send: Send) -> None:
        response = JSONResponse(
            error_body(f"request body over {self.max_body_bytes} bytes", code="request_too_large"),
            status_code=413,
        )
        await response({"type": "http"}, _no_receive, send)


async def _no_receive() -> Message:
    return {"type": "http.disconnect"}


def install_error_handlers(app: FastAPI) -> None:
    """Map validation and HTTP errors to OpenAI-shaped JSON errors (see module docstring)."""

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        bad_json = [e for e in errors if e.get("type") == "json_invalid"]
        if bad_json:
            detail = bad_json[0].get("ctx", {}).get("error", "invalid JSON")
            return JSONResponse(error_body(f"body is not valid JSON: {detail}"), status_code=400)
        parts = []
        for e in errors:
            loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{loc}: {e.get('msg')}")
        first = errors[0].get("loc", ()) if errors else ()
        param = ".".join(str(p) for p in first if p != "body") or None
        return JSONResponse(error_body("; ".join(parts), param=param), status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "request_too_large" if exc.status_code == 413 else exc.status_code
        return JSONResponse(error_body(str(exc.detail), code=code), status_code=exc.status_code)

"""Request guards: a body-size limit, per-request metrics, and errors in OpenAI's shape.

Every error response is `{"error": {"message", "type", "param", "code"}}`, `code`
a string (or null) as OpenAI's: 400 for a body that is not JSON (`invalid_json`) or
fields that fail validation (`invalid_type` for a value of the wrong JSON type,
`invalid_value` otherwise; the message names each field, `param` the first), 413 for
a body over the limit, 404/405 from routing (`not_found`, `method_not_allowed`), 500
when generation fails before the reply started.

An unexpected exception (a bug) is answered with a shaped 500 whose message gives
no internals, counted in `dlm_unexpected_errors_total` and logged once with its
traceback on the `dlm.serve` logger; the response is complete, so the client's
keep-alive connection stays usable. When a streamed reply had already started, the
stream ends instead (counted and logged the same way).
"""

from __future__ import annotations

import asyncio
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
MODEL_CARD_PREFIX = "/v1/models/"
log = logging.getLogger("dlm.serve")


_HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 413: "request_too_large", 408: "request_timeout"}


def error_body(
    message: str, *, kind: str = "invalid_request_error", param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """OpenAI's error shape; `code` is a short snake_case string or None."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class _TooLarge(StarletteHTTPException):
    """Raised while reading a body past the limit; FastAPI passes HTTP exceptions through
    its body parsing, so the app's handler answers 413."""

    def __init__(self, limit: int):
        super().__init__(status_code=413, detail=f"request body over {limit} bytes")


class _BodyTimeout(StarletteHTTPException):
    """Raised while reading a body that did not arrive in time; answered 408."""

    def __init__(self, seconds: float):
        super().__init__(status_code=408, detail=f"the request body did not arrive within {seconds:g} s")


class GuardMiddleware:
    """Pure ASGI middleware: refuses bodies over `max_body_bytes` with 413 (by the
    Content-Length header, or while reading a chunked body), answers 408 when the body
    is not complete `body_timeout` seconds after the request head, and records each
    HTTP request's status and latency (until the last body byte is sent) in `metrics`.
    A response the client abandoned before its last byte (a stream it closed) is
    counted with status 499, as nginx logs it."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, body_timeout: float, metrics: ServerMetrics):
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        endpoint = path if path in KNOWN_ENDPOINTS else "other"
        if path.startswith(MODEL_CARD_PREFIX):
            endpoint = "/v1/models/{id}"  # one series for every id, not one per id
        started = time.perf_counter()
        state = {"status": 500, "started": False, "observed": False, "failed": False}

        async def tracked_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["status"], state["started"] = message["status"], True
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                state["observed"] = True
                self.metrics.observe(endpoint, int(state["status"]), time.perf_counter() - started)

        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
            await self._too_large(tracked_send)
            return
        received = 0
        body_done = False
        body_deadline = started + self.body_timeout

        async def limited_receive() -> Message:
            nonlocal received, body_done
            if body_done:  # past the body: waiting for a disconnect has no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(body_deadline - time.perf_counter(), 0.0))
            except asyncio.TimeoutError:
                raise _BodyTimeout(self.body_timeout) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _TooLarge(self.max_body_bytes)
                body_done = not message.get("more_body", False)
            return message

        try:
            await self.app(scope, limited_receive, tracked_send)
        except _TooLarge:
            if not state["started"]:
                await self._too_large(tracked_send)
        except _BodyTimeout as exc:
            if not state["started"]:
                body = error_body(str(exc.detail), code="request_timeout")
                response = JSONResponse(body, status_code=408, headers={"connection": "close"})
                await response({"type": "http"}, _no_receive, tracked_send)
        except Exception:
            state["failed"] = True
            self.metrics.unexpected_errors.inc()
            log.exception("unexpected error serving %s %s", scope.get("method"), path)
            if not state["started"]:
                response = JSONResponse(
                    error_body(
                        "internal server error; the server log has the details",
                        kind="server_error",
                        code="internal_error",
                    ),
                    status_code=500,
                )
                await response({"type": "http"}, _no_receive, tracked_send)
        finally:
            if not state["observed"]:  # the response never completed
                status = 500 if state["failed"] else 499
                self.metrics.observe(endpoint, status, time.perf_counter() - started)

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
            return JSONResponse(error_body(f"body is not valid JSON: {detail}", code="invalid_json"), status_code=400)
        parts = []
        for e in errors:
            loc = ".".join(str(p) for p in e.get("loc", ()) if p != "body") or "body"
            parts.append(f"{loc}: {e.get('msg')}")
        first = errors[0].get("loc", ()) if errors else ()
        param = ".".join(str(p) for p in first if p != "body") or None
        kind = str(errors[0].get("type", "")) if errors else ""
        code = "invalid_type" if kind.endswith(("_type", "_parsing")) else "invalid_value"
        return JSONResponse(error_body("; ".join(parts), param=param, code=code), status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        return JSONResponse(error_body(str(exc.detail), code=code), status_code=exc.status_code)

"""A uvicorn server for the app, in the foreground or on a thread you can stop.

The server binds 127.0.0.1 unless told otherwise; `bind_warning` says when a host
exposes it beyond this machine (there is no authentication).
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from typing import Any

from dlm.defaults import DEFAULT_HOST
from dlm.errors import ServeError
from dlm.defaults import DEFAULT_SHUTDOWN_TIMEOUT


def bind_warning(host: str) -> str | None:
    """A warning when `host` is not a loopback address (None when it is)."""
    if host == "localhost":
        return None
    try:
        if ipaddress.ip_address(host).is_loopback:
            return None
    except ValueError:
        pass
    return f"listening on {host}: the server has no authentication and is reachable from other machines"


def uvicorn_server(app: Any, host: str, port: int, *, shutdown_timeout: float, log_level: str) -> Any:
    """A `uvicorn.Server` for `app` that, when told to stop (SIGTERM, SIGINT,
    `should_exit`), first refuses new generations and ends queued ones with 503
    (`Generation.begin_shutdown`), then gives in-flight requests `shutdown_timeout`
    seconds before uvicorn cancels them (each cancelled generation stops within one
    decoding step), then exits."""
    import uvicorn

    class _Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            generation = getattr(getattr(app, "state", None), "generation", None)
            if generation is not None:
                generation.begin_shutdown()
            await super().shutdown(sockets)

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=math.ceil(shutdown_timeout),  # uvicorn takes whole seconds
    )
    return _Server(config)


class RunningServer:
    """A uvicorn server on a background thread; `url` once started, `stop()` to end it.

    Args:
        app: the ASGI app. host / port: where to bind (port 0: ephemeral).
        start_timeout: seconds to wait for the socket to listen.
        shutdown_timeout: seconds in-flight requests get on `stop()` (see `uvicorn_server`).

    Raises:
        ServeError: the server did not start (port in use, bad host) in time.
    """

    def __init__(
        self,
        app: Any,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        start_timeout: float = 30.0,
        shutdown_timeout: float = 5.0,
    ):
        self._server = uvicorn_server(app, host, port, shutdown_timeout=shutdown_timeout, log_level="warning")
        self._thread = threading.Thread(target=self._server.run, name="dlm-serve", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServeError(f"could not start the server on {host}:{port} (port in use or bad host?)")
            time.sleep(0.02)
        sock = self._server.servers[0].sockets[0]
        self.host, self.port = sock.getsockname()[:2]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to exit and wait up to `timeout` seconds for it."""
        self._server.should_exit = True
        self._thread.join(timeout)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(app: Any, host: str, port: int, shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT) -> None:
    """Run uvicorn in the foreground until SIGTERM or Ctrl-C; then stop as
    `uvicorn_server` says, within about `shutdown_timeout` seconds."""
    uvicorn_server(app, host, port, shutdown_timeout=shutdown_timeout, log_level="info").run()

"""A uvicorn server for the app, in the foreground or on a thread you can stop.

The listening socket is bound first (`bind_socket`): a busy port or a bad host is a
`ServeError` before any model is loaded, and the address printed is the one bound
(`--port 0` shows the port the system chose; an IPv6 host is shown in brackets).
The server binds 127.0.0.1 unless told otherwise; `bind_warning` says when a host
exposes it beyond this machine (there is no authentication). Connection bounds
(count, header/body/keep-alive timeouts) come from `dlm.serve.limits`.

Stopping (SIGTERM, Ctrl-C, `RunningServer.stop`): new generations are refused and
queued ones end with 503, in-flight requests get `shutdown_timeout` seconds, then
uvicorn cancels them; last, every generation still running is cancelled and its
worker thread joined (it stops within one decoding step), so the process never
exits with a thread inside a forward pass.
"""

from __future__ import annotations

import ipaddress
import math
import signal
import socket
import threading
import time
from typing import Any, Protocol

from dlm.defaults import DEFAULT_HOST, DEFAULT_SHUTDOWN_TIMEOUT
from dlm.errors import ServeError
from dlm.serve.app import ServeApp
from dlm.serve.limits import ConnectionLimits

WORKER_JOIN_TIMEOUT = 30.0
BACKSTOP_SECONDS = 3


class Stoppable(Protocol):
    """What the server stops (`dlm.serve.generation.Generation` is one)."""

    def begin_shutdown(self) -> None: ...

    def cancel_all(self) -> None: ...

    def close(self, timeout: float) -> None: ...


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


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (`host`, `port`), not yet listening (uvicorn listens).

    Raises:
        ServeError: the port is in use, the address is not this machine's, or the host
            does not resolve (one line naming host and port).
    """
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}; check --host") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        hint = "choose another --port (0: any free port)" if port else "check --host"
        raise ServeError(f"cannot listen on {format_url(host, port)}: {exc.strerror}; {hint}") from None
    sock.set_inheritable(True)
    return sock


def format_url(host: str, port: int) -> str:
    """`http://host:port`, an IPv6 address in brackets."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def socket_url(sock: socket.socket) -> str:
    """The URL of a bound socket (its real port)."""
    host, port = sock.getsockname()[:2]
    return format_url(host, port)


def uvicorn_server(
    app: Any,
    *,
    shutdown_timeout: float,
    log_level: str,
    limits: ConnectionLimits,
    stopping: Stoppable | None = None,
) -> Any:
    """A `uvicorn.Server` for `app` that, when told to stop, first calls
    `stopping.begin_shutdown()` (see the module docstring), then gives in-flight
    requests `shutdown_timeout` seconds before `stopping.cancel_all()` ends their
    generations; each reply then ends as a cancelled one does (a stream without
    `[DONE]`), and uvicorn's own cancellation of tasks, a few seconds later, is only
    the backstop for a request stuck elsewhere."""
    import asyncio

    import uvicorn

    class _Server(uvicorn.Server):
        interrupted = False

        def handle_exit(self, sig: int, frame: Any) -> None:
            self.interrupted = self.interrupted or sig == signal.SIGINT
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets: Any = None) -> None:
            timer = None
            if stopping is not None:
                stopping.begin_shutdown()
                timer = asyncio.get_running_loop().call_later(shutdown_timeout, stopping.cancel_all)
            try:
                await super().shutdown(sockets)
            finally:
                if timer is not None:
                    timer.cancel()

    config = uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="off",
        access_log=False,
        # uvicorn takes whole seconds; ours cancels first, this is the backstop
        timeout_graceful_shutdown=math.ceil(shutdown_timeout) + BACKSTOP_SECONDS,
        **limits.uvicorn_settings(),
    )
    return _Server(config)


class RunningServer:
    """A uvicorn server on a background thread; `url` once started, `stop()` to end it.

    Args:
        app: a `ServeApp` (its generation is stopped with the server), or any ASGI app.
        host / port: where to bind (port 0: ephemeral).
        start_timeout: seconds to wait for the socket to listen.
        shutdown_timeout: seconds in-flight requests get on `stop()` (see `uvicorn_server`).
        limits: connection bounds. stopping: what to stop with the server.

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
        limits: ConnectionLimits | None = None,
        stopping: Stoppable | None = None,
    ):
        if isinstance(app, ServeApp):
            app, stopping = app.app, stopping or app.state.generation
        self._stopping = stopping
        self._socket = bind_socket(host, port)
        self._server = uvicorn_server(
            app,
            shutdown_timeout=shutdown_timeout,
            log_level="warning",
            limits=limits or ConnectionLimits(),
            stopping=self._stopping,
        )
        self.url = socket_url(self._socket)
        self.host, self.port = self._socket.getsockname()[:2]
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, name="dlm-serve", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + start_timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServeError(f"could not start the server on {self.url}")
            time.sleep(0.02)

    @property
    def server(self) -> Any:
        """The `uvicorn.Server` (its `server_state` counts connections and tasks)."""
        return self._server

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the server to exit, wait up to `timeout` seconds for it, then stop what
        still generates."""
        self._server.should_exit = True
        self._thread.join(timeout)
        if self._stopping is not None:
            self._stopping.close(WORKER_JOIN_TIMEOUT)
        self._socket.close()

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(
    app: Any,
    sock: socket.socket,
    *,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    limits: ConnectionLimits | None = None,
    stopping: Stoppable | None = None,
) -> None:
    """Run uvicorn in the foreground on the bound `sock` until SIGTERM or Ctrl-C; then
    stop as the module docstring says. uvicorn re-raises the signal it caught once it
    has shut down: Ctrl-C leaves as `KeyboardInterrupt` (exit 130 at the CLI's
    boundary), SIGTERM as the default action of the signal."""
    server = uvicorn_server(
        app, shutdown_timeout=shutdown_timeout, log_level="info", limits=limits or ConnectionLimits(), stopping=stopping
    )
    try:
        server.run(sockets=[sock])
    finally:
        if stopping is not None:
            stopping.close(WORKER_JOIN_TIMEOUT)
    if server.interrupted:
        # uvicorn re-raises the Ctrl-C it caught once it has shut down, into asyncio's own
        # SIGINT handler, which only cancels the server's task; that re-raise was seen lost
        # on a loaded machine (exit 0 after "Finished server process"), so it is made here
        raise KeyboardInterrupt

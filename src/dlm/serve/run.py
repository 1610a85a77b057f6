"""A uvicorn server for the app, in the foreground or on a thread you can stop.

The server binds 127.0.0.1 unless told otherwise; `bind_warning` says when a host
exposes it beyond this machine (there is no authentication).
"""

from __future__ import annotations

import ipaddress
import threading
import time
from typing import Any

from dlm.defaults import DEFAULT_HOST
from dlm.errors import ServeError


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


class RunningServer:
    """A uvicorn server on a background thread; `url` once started, `stop()` to end it.

    Args:
        app: the ASGI app. host / port: where to bind (port 0: ephemeral).
        start_timeout: seconds to wait for the socket to listen.

    Raises:
        ServeError: the server did not start (port in use, bad host) in time.
    """

    def __init__(self, app: Any, host: str = DEFAULT_HOST, port: int = 0, *, start_timeout: float = 30.0):
        import uvicorn

        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", lifespan="off", access_log=False
        )
        self._server = uvicorn.Server(config)
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


def serve_forever(app: Any, host: str, port: int) -> None:
    """Run uvicorn in the foreground until Ctrl-C (it handles the signal and drains)."""
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="info", lifespan="off")

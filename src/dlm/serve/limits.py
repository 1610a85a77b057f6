"""Connection limits: how many clients the server holds, and how long a slow one may take.

uvicorn bounds idle keep-alive connections (`timeout_keep_alive`), the size of a
request head (h11's `max_incomplete_event_size`) and, with `limit_concurrency`, answers
503 once too many connections or requests are open. Two bounds it lacks are added by
`bounded_h11_protocol`, a small subclass of its h11 protocol:

- a header timeout: a connection that has not sent a complete request head within
  `header_timeout` seconds of opening (or of its previous response) is closed,
  however slowly it trickles bytes in (uvicorn's keep-alive timer restarts on every
  byte);
- a connection cap: a connection accepted while `max_connections` are open is closed
  at once, so slow clients hold at most `max_connections` descriptors.

The body timeout (a request whose body does not arrive within `body_timeout`
seconds gets 408) is enforced where the body is read (`dlm.serve.guards`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

DEFAULT_MAX_CONNECTIONS = 256
DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 30.0
DEFAULT_KEEP_ALIVE_TIMEOUT = 5.0
DEFAULT_MAX_HEADER_BYTES = 64 * 1024


@dataclass(frozen=True)
class ConnectionLimits:
    """Bounds on clients (seconds, bytes, counts).

    Attributes:
        max_connections: open connections; one more is closed when accepted.
        header_timeout: seconds a connection may take to send a request head.
        body_timeout: seconds a request may take to send its whole body (then 408).
        keep_alive_timeout: seconds an idle keep-alive connection is kept.
        max_header_bytes: a request head larger than this gets 400.
    """

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    keep_alive_timeout: float = DEFAULT_KEEP_ALIVE_TIMEOUT
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES

    def uvicorn_settings(self) -> dict[str, Any]:
        """The `uvicorn.Config` keyword arguments these limits map to."""
        return {
            "http": bounded_h11_protocol(self),
            # uvicorn's own cap answers 503 to requests over it; ours (closing at
            # accept) comes first, so this is the backstop for requests in flight
            "limit_concurrency": self.max_connections + 1,
            "timeout_keep_alive": self.keep_alive_timeout,
            "h11_max_incomplete_event_size": self.max_header_bytes,
        }


def bounded_h11_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with the header timeout and connection cap of `limits`."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class BoundedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            if len(self.connections) >= limits.max_connections:
                transport.close()
                return
            super().connection_made(transport)
            self._arm_head_timer()

        def data_received(self, data: bytes) -> None:
            if self.transport is None:  # closed at accept
                return
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # a whole request head arrived
                self._disarm_head_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm_head_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.transport is None:  # closed at accept: never counted
                return
            self._disarm_head_timer()
            super().connection_lost(exc)

        def _arm_head_timer(self) -> None:
            self._disarm_head_timer()
            self._head_timer = self.loop.call_later(limits.header_timeout, self._head_timed_out)

        def _disarm_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return BoundedH11Protocol

"""Connection bounds and binding: slow clients on loopback are bounded in count and
time, a slow body gets 408, the bound address is the real one (port 0, IPv6 in
brackets) and a busy port is one clear error."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fake_engine import FakeEngine

from dlm.errors import ServeError
from dlm.serve.app import create_app
from dlm.serve.limits import ConnectionLimits
from dlm.serve.server import RunningServer, bind_socket, socket_url
from dlm.serve.tokcache import TokenizerCacheConfig

LIMITS = ConnectionLimits(max_connections=16, header_timeout=0.5, body_timeout=0.5)
SLOW_CLIENTS = 64


@pytest.fixture
def server(smollm2_tokenizer: Any) -> Iterator[RunningServer]:
    app = create_app(FakeEngine(smollm2_tokenizer), TokenizerCacheConfig(), body_timeout=LIMITS.body_timeout)
    with RunningServer(app, limits=LIMITS) as running:
        yield running


def closed_by_server(sock: socket.socket, wait: float) -> bool:
    """True when the server closed `sock` within `wait` seconds (EOF or reset)."""
    sock.settimeout(wait)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_slow_header_clients_are_bounded_in_count_and_time(server: RunningServer) -> None:
    socks = []
    for _ in range(SLOW_CLIENTS):
        sock = socket.create_connection((server.host, server.port))
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")  # never finishes its head
        socks.append(sock)
    try:
        time.sleep(0.1)
        held = len(server.server.server_state.connections)
        assert held <= LIMITS.max_connections
        # every one is closed: those over the cap at once, the rest after the header timeout
        assert all(closed_by_server(sock, wait=10) for sock in socks)
        assert len(server.server.server_state.connections) == 0
        assert httpx.get(server.url + "/health").status_code == 200  # still serving
    finally:
        for sock in socks:
            sock.close()


def test_a_body_that_does_not_arrive_gets_408(server: RunningServer) -> None:
    with socket.create_connection((server.host, server.port)) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
            b'content-length: 100\r\n\r\n{"messages"'
        )
        sock.settimeout(10)
        reply = b""
        while b"request_timeout" not in reply and (chunk := sock.recv(4096)):
            reply += chunk  # the head and the body may come in separate segments
    assert reply.startswith(b"HTTP/1.1 408 ")
    assert b'"code":"request_timeout"' in reply


def test_the_bound_address_is_the_real_one() -> None:
    sock = bind_socket("127.0.0.1", 0)
    sock.listen()  # as the server does
    try:
        port = sock.getsockname()[1]
        assert port != 0 and socket_url(sock) == f"http://127.0.0.1:{port}"
        with pytest.raises(ServeError, match=f"cannot listen on http://127.0.0.1:{port}: .*choose another --port"):
            bind_socket("127.0.0.1", port)
    finally:
        sock.close()


def test_an_ipv6_address_is_shown_in_brackets() -> None:
    try:
        sock = bind_socket("::1", 0)
    except ServeError:
        pytest.skip("no IPv6 loopback here")
    with sock:
        assert socket_url(sock) == f"http://[::1]:{sock.getsockname()[1]}"

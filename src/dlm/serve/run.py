"""`dlm serve` as a library: settings, loading, and a uvicorn server you can start and stop.

Tokenizer cache settings come from three places, later ones winning: the document's
`serve.tokenizer_cache` frontmatter block, the `tokenizer_cache` block of a
`--config FILE.json` (a JSON object whose only key is `tokenizer_cache`), and
command-line flags (`dlm.serve.tokcache.config` documents the keys).

The server binds 127.0.0.1 unless told otherwise; `bind_warning` says when a host
exposes it beyond this machine (there is no authentication).
"""

from __future__ import annotations

import ipaddress
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.errors import ServeError
from dlm.serve import DEFAULT_MAX_QUEUE, DEFAULT_SHUTDOWN_TIMEOUT
from dlm.serve.app import DEFAULT_MAX_BODY_BYTES, create_app
from dlm.serve.tokcache import TokenizerCacheConfig, merge_config

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
_CONFIG_KEYS = frozenset({"tokenizer_cache"})


@dataclass(frozen=True)
class ServeOptions:
    """Everything `dlm serve` is told.

    Attributes:
        path: the `.dlm` document.
        host / port: where to listen (port 0: an ephemeral port).
        config_file: `--config FILE.json`, or None.
        cache_flags: tokenizer cache keys given on the command line (None: not given).
        use_adapter: load the document's current adapter (else the base model alone).
        max_body_bytes: request bodies over this get 413.
        max_queue: generation requests that may wait while one runs (more get 503).
        shutdown_timeout: seconds in-flight requests get to finish after SIGTERM or
            Ctrl-C before they are cancelled and the server exits.
    """

    path: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    config_file: Path | None = None
    cache_flags: Mapping[str, Any] = field(default_factory=dict)
    use_adapter: bool = True
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_queue: int = DEFAULT_MAX_QUEUE
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT


def read_config_file(path: Path) -> Mapping[str, Any] | None:
    """The `tokenizer_cache` block of a `--config` JSON file (None when absent).

    Raises:
        ServeError: unreadable file, invalid JSON (with line:col), not an object, unknown keys.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ServeError(f"{path}: cannot read --config file ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ServeError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ServeError(f'{path}: --config must hold a JSON object like {{"tokenizer_cache": {{...}}}}')
    unknown = sorted(set(data) - _CONFIG_KEYS)
    if unknown:
        raise ServeError(
            f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_CONFIG_KEYS))}"
        )
    return data.get("tokenizer_cache")


def resolve_cache_config(doc: Any, options: ServeOptions) -> TokenizerCacheConfig:
    """Merge frontmatter, `--config` and flags (in that precedence order, lowest first).

    Raises:
        ServeError / TokenizerCacheConfigError: bad file or values, naming their source.
    """
    frontmatter = doc.frontmatter.serve.tokenizer_cache.model_dump()
    layers: list[tuple[str, Mapping[str, Any] | None]] = [(f"{doc.path}: serve.tokenizer_cache", frontmatter)]
    if options.config_file is not None:
        layers.append((f"{options.config_file}: tokenizer_cache", read_config_file(options.config_file)))
    layers.append(("command line", dict(options.cache_flags)))
    return merge_config(*layers)


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


def build_app(options: ServeOptions) -> Any:
    """Load the document, its base model and adapter, and build the app.

    Raises:
        DocError, StoreError, BaseModelError, ServeError: as the steps they come from.
    """
    from dlm.doc import load_document
    from dlm.infer import load_inference

    from dlm.serve.warm import warm_start

    doc = load_document(options.path)
    config = resolve_cache_config(doc, options)
    engine, cached = warm_start(load_inference(doc, use_adapter=options.use_adapter), config)
    return create_app(engine, max_body_bytes=options.max_body_bytes, max_queue=options.max_queue, cached=cached)


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
        timeout_graceful_shutdown=shutdown_timeout,
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

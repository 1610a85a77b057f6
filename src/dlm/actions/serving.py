"""`dlm serve` setup: settings, loading the document's model, building the app.

Tokenizer cache settings come from three places, later ones winning: the document's
`serve.tokenizer_cache` frontmatter block, the `tokenizer_cache` block of a
`--config FILE.json` (a JSON object whose only key is `tokenizer_cache`), and
command-line flags (`dlm.serve.tokcache.config` documents the keys). Running the app
is the serve engine's (`dlm.serve.run`).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.defaults import DEFAULT_HOST, DEFAULT_MAX_QUEUE, DEFAULT_PORT, DEFAULT_SHUTDOWN_TIMEOUT
from dlm.doc import Document
from dlm.errors import ServeError
from dlm.serve.app import DEFAULT_MAX_BODY_BYTES, create_app
from dlm.serve.run import Stoppable, bind_socket, bind_warning, serve_forever, socket_url
from dlm.serve.tokcache import TokenizerCacheConfig, merge_config
from dlm.serve.warm import warm_start

_CONFIG_KEYS = frozenset({"tokenizer_cache"})
__all__ = [
    "BuiltServer",
    "ServeOptions",
    "bind_socket",
    "bind_warning",
    "build_app",
    "read_config_file",
    "resolve_cache_config",
    "run_server",
    "socket_url",
]


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
        shutdown_timeout: seconds in-flight requests get after SIGTERM / Ctrl-C.
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


def resolve_cache_config(doc: Document, options: ServeOptions) -> TokenizerCacheConfig:
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


@dataclass(frozen=True)
class BuiltServer:
    """A server ready to run: the app, what to stop with it, and start-up warnings."""

    app: Any
    stopping: Stoppable
    warnings: tuple[str, ...] = ()


def build_app(options: ServeOptions) -> BuiltServer:
    """Load the document, its base model and adapter, and build the app.

    Raises:
        DocError, StoreError, BaseModelError, ServeError: as the steps they come from.
    """
    from dlm.doc import load_document
    from dlm.infer import load_inference

    doc = load_document(Path(options.path))
    config = resolve_cache_config(doc, options)
    engine, cached = warm_start(load_inference(doc, use_adapter=options.use_adapter), config)
    app = create_app(engine, max_body_bytes=options.max_body_bytes, max_queue=options.max_queue, cached=cached)
    refused = cached.stats().l1_refused
    warnings = (f"tokenizer cache L1 is off for this tokenizer: {refused}",) if refused else ()
    return BuiltServer(app, app.state.generation, warnings)


def run_server(built: BuiltServer, sock: socket.socket, options: ServeOptions) -> None:
    """Serve `built` on the bound `sock` until SIGTERM or Ctrl-C (`dlm.serve.run.serve_forever`)."""
    serve_forever(built.app, sock, shutdown_timeout=options.shutdown_timeout, stopping=built.stopping)

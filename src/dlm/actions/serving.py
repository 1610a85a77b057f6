"""`dlm serve` setup: settings, loading the documents' base model and adapters, building the app.

Every document named (or found in a folder named) is served over one copy of their
shared base model, each with its current adapter as a peft named adapter
(`dlm.infer.adapters`); the request's `model` picks one (`dlm.serve.catalog`), and
newly published versions are loaded while serving (`dlm.serve.reload`).

Tokenizer cache settings come from three places, later ones winning: the first
document's `serve.tokenizer_cache` frontmatter block, the `tokenizer_cache` block of a
`--config FILE.json` (a JSON object whose only key is `tokenizer_cache`), and
command-line flags (`dlm.serve.tokcache.config` documents the keys). Running the app
is the serve engine's (`dlm.serve.server`).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dlm.defaults import DEFAULT_HOST, DEFAULT_MAX_QUEUE, DEFAULT_PORT, DEFAULT_SHUTDOWN_TIMEOUT
from dlm.doc import Document
from dlm.errors import ServeError
from dlm.infer.adapters import SharedBase
from dlm.serve.app import DEFAULT_MAX_BODY_BYTES, ServeApp, create_app
from dlm.serve.catalog import Catalog, ServedModel
from dlm.serve.reload import DEFAULT_RELOAD_INTERVAL, AdapterReloader
from dlm.serve.server import bind_socket, bind_warning, serve_forever, socket_url
from dlm.serve.tokcache import TokenizerCacheConfig, merge_config
from dlm.serve.warm import warm_start

_CONFIG_KEYS = frozenset({"tokenizer_cache"})
__all__ = [
    "BuiltServer",
    "Listener",
    "ServeOptions",
    "build_app",
    "listen",
    "read_config_file",
    "resolve_cache_config",
    "run_server",
]


@dataclass(frozen=True)
class Listener:
    """The server's bound socket (not yet listening: uvicorn listens on it), and a
    warning when the host is not a loopback address."""

    sock: socket.socket
    warning: str | None

    @property
    def url(self) -> str:
        """`http://HOST:PORT` with the real port (`--port 0`), IPv6 in brackets."""
        return socket_url(self.sock)


def listen(host: str, port: int) -> Listener:
    """Bind the server's address before any model loads, so a busy port is one line at once.

    Raises:
        ServeError: the address cannot be bound (in use, not an address of this machine).
    """
    return Listener(bind_socket(host, port), bind_warning(host))


@dataclass(frozen=True)
class ServeOptions:
    """Everything `dlm serve` is told.

    Attributes:
        paths: the `.dlm` documents, or folders of them (one base model for all).
        host / port: where to listen (port 0: an ephemeral port).
        config_file: `--config FILE.json`, or None.
        cache_flags: tokenizer cache keys given on the command line (None: not given).
        use_adapter: load the document's current adapter (else the base model alone).
        max_body_bytes: request bodies over this get 413.
        max_queue: generation requests that may wait while one runs (more get 503).
        shutdown_timeout: seconds in-flight requests get after SIGTERM / Ctrl-C.
        reload_interval: seconds between checks for newly published adapters (0: never).
    """

    paths: Sequence[Path]
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    config_file: Path | None = None
    cache_flags: Mapping[str, Any] = field(default_factory=dict)
    use_adapter: bool = True
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    max_queue: int = DEFAULT_MAX_QUEUE
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    reload_interval: float = DEFAULT_RELOAD_INTERVAL


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
        raise ServeError(f"{path}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(_CONFIG_KEYS))}")
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
    """A server ready to run: the app and its state, the adapter reloader, the URL
    it will print, and start-up warnings."""

    served: ServeApp
    reloader: AdapterReloader | None
    warnings: tuple[str, ...] = ()


def document_paths(paths: Sequence[Path]) -> list[Path]:
    """The documents named: files as given, folders as their `*.dlm` files (sorted).

    Raises:
        ServeError: a path does not exist, or a folder holds no `.dlm` file.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(path.glob("*.dlm"))
            if not inside:
                raise ServeError(f"{path}: no .dlm documents in this folder")
            found += inside
        elif path.exists():
            found.append(path)
        else:
            raise ServeError(f"{path}: no such file or folder")
    return found


def check_distinct_ids(docs: Sequence[Document]) -> None:
    """Refuse two documents with one `dlm_id` (a copied file): they would share one store,
    so one name could answer with either document's system prompt and adapter.

    Raises:
        ServeError: one line naming the id, both files and the way out.
    """
    seen: dict[str, Path | None] = {}
    for doc in docs:
        dlm_id = doc.frontmatter.dlm_id
        if dlm_id in seen:
            raise ServeError(
                f"{seen[dlm_id]} and {doc.path} both have dlm_id {dlm_id} (one is a copy); serve one of "
                f"them, or give the copy a new dlm_id (`dlm init` writes a fresh one) and train it"
            )
        seen[dlm_id] = doc.path


def catalog_for(shared: SharedBase) -> Catalog:
    """Each document under `dlm:<dlm_id>` (also by its name and dlm_id), then the
    base model alone under its name.

    Raises:
        ServeError: two documents answer to one name (same file stem or dlm_id).
    """
    base = shared.base.name
    models = [
        ServedModel(f"dlm:{d.dlm_id}", d.system_prompt, d.adapter, d.name, d.dlm_id, d.version, base, d.path)
        for d in shared.documents
    ]
    models.append(ServedModel(base, None, None, None, None, None, base))
    try:
        return Catalog(models)
    except ValueError as exc:
        raise ServeError(f"cannot serve these documents together: {exc}; rename one file") from None


def build_app(options: ServeOptions) -> BuiltServer:
    """Load the documents, their one base model and each current adapter, and build the app.

    Raises:
        DocError, StoreError, BaseModelError, ServeError: as the steps they come from;
            ServeError also for two documents with one `dlm_id`, before any model loads.
    """
    from dlm.doc import load_document
    from dlm.infer.adapters import load_shared_base

    docs = [load_document(p) for p in document_paths(options.paths)]
    check_distinct_ids(docs)
    config = resolve_cache_config(docs[0], options)
    shared = load_shared_base(docs, use_adapter=options.use_adapter)
    catalog = catalog_for(shared)
    engine, cached = warm_start(shared, config, system_prompts=[m.system_prompt for m in catalog.models()])
    served = create_app(
        engine, catalog=catalog, max_body_bytes=options.max_body_bytes, max_queue=options.max_queue, cached=cached
    )
    reloader = None
    if options.use_adapter and options.reload_interval > 0:
        reloader = AdapterReloader(catalog, engine, interval=options.reload_interval, status=served.state.reloads)
    refused = cached.stats().l1_refused
    warnings = (f"tokenizer cache L1 is off for this tokenizer: {refused}",) if refused else ()
    return BuiltServer(served, reloader, warnings)


def run_server(built: BuiltServer, sock: socket.socket, options: ServeOptions) -> None:
    """Serve `built` on the bound `sock` until SIGTERM or Ctrl-C (`dlm.serve.server.serve_forever`),
    reloading adapters as they are published."""
    if built.reloader is not None:
        built.reloader.start()
    try:
        serve_forever(
            built.served.app, sock, shutdown_timeout=options.shutdown_timeout, stopping=built.served.state.generation
        )
    finally:
        if built.reloader is not None:
            built.reloader.stop()

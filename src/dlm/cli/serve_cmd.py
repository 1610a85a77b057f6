"""`dlm serve`: an OpenAI-compatible server for documents' adapters over one base model.

Thin: `dlm.actions.serving` resolves settings and builds the app; this module parses flags,
prints where it listens, and runs uvicorn in the foreground until Ctrl-C.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from dlm.cli.reporter import console, reported, warn_line
from dlm.defaults import (
    DEFAULT_HOST,
    DEFAULT_MAX_QUEUE,
    DEFAULT_PORT,
    DEFAULT_RELOAD_INTERVAL,
    DEFAULT_SHUTDOWN_TIMEOUT,
)


def register(app: typer.Typer) -> None:
    """Add the `serve` command to `app`."""
    app.command("serve")(reported(serve))


def serve(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="The .dlm documents to serve, or folders of them (one base model for all).",
            show_default=False,
        ),
    ],
    host: Annotated[str, typer.Option("--host", help="Address to listen on (loopback by default).")] = DEFAULT_HOST,
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port (0: any free port).")] = DEFAULT_PORT,
    config: Annotated[
        Path | None,
        typer.Option("--config", help='JSON file: {"tokenizer_cache": {...}} (flags override it).', show_default=False),
    ] = None,
    enable_l0: Annotated[
        bool | None,
        typer.Option(
            "--tokenizer-cache-enable-l0/--tokenizer-cache-disable-l0",
            help="Exact-prompt cache.",
            show_default=False,
        ),
    ] = None,
    l0_max_entries: Annotated[
        int | None,
        typer.Option("--tokenizer-cache-l0-max-entries", help="L0 capacity (entries).", show_default=False),
    ] = None,
    l0_max_memory: Annotated[
        int | None,
        typer.Option("--tokenizer-cache-l0-max-memory", help="L0 capacity (bytes).", show_default=False),
    ] = None,
    enable_l1: Annotated[
        bool | None,
        typer.Option(
            "--tokenizer-cache-enable-l1/--tokenizer-cache-disable-l1",
            help="Special-token prefix cache.",
            show_default=False,
        ),
    ] = None,
    l1_max_memory: Annotated[
        int | None,
        typer.Option("--tokenizer-cache-l1-max-memory", help="L1 capacity (bytes).", show_default=False),
    ] = None,
    l1_min_prompt_chars: Annotated[
        int | None,
        typer.Option("--tokenizer-cache-l1-min-prompt-chars", help="Shorter prompts skip L1.", show_default=False),
    ] = None,
    no_adapter: Annotated[bool, typer.Option("--no-adapter", help="Serve the base model alone.")] = False,
    max_queue: Annotated[
        int,
        typer.Option("--max-queue", min=0, help="Generation requests that may wait while one runs; more get 503."),
    ] = DEFAULT_MAX_QUEUE,
    shutdown_timeout: Annotated[
        float,
        typer.Option(
            "--shutdown-timeout",
            min=0.0,
            help="Seconds in-flight requests get to finish after SIGTERM/Ctrl-C before they are cancelled.",
        ),
    ] = DEFAULT_SHUTDOWN_TIMEOUT,
    reload_interval: Annotated[
        float,
        typer.Option(
            "--reload-interval",
            min=0.0,
            help="Seconds between checks for newly published adapters, served without restart (0: never).",
        ),
    ] = DEFAULT_RELOAD_INTERVAL,
) -> None:
    """Serve documents' adapters over one base model (OpenAI-compatible API; `model` picks the document)."""
    from dlm.actions.serving import ServeOptions, build_app, listen, run_server

    flags = {
        "enable_l0": enable_l0,
        "l0_max_entries": l0_max_entries,
        "l0_max_memory": l0_max_memory,
        "enable_l1": enable_l1,
        "l1_max_memory": l1_max_memory,
        "l1_min_prompt_chars": l1_min_prompt_chars,
    }
    options = ServeOptions(
        paths=paths,
        host=host,
        port=port,
        config_file=config,
        cache_flags=flags,
        use_adapter=not no_adapter,
        max_queue=max_queue,
        shutdown_timeout=shutdown_timeout,
        reload_interval=reload_interval,
    )
    listener = listen(host, port)  # a busy port fails here, before the model loads
    if listener.warning:
        warn_line(listener.warning)
    with listener.sock as sock:
        built = build_app(options)
        for line in built.warnings:
            warn_line(line)
        names = ", ".join(m.id for m in built.served.state.catalog.models())
        console.print(f"serving [bold]{escape(names)}[/] on {escape(listener.url)}/v1 (Ctrl-C to stop)")
        run_server(built, sock, options)

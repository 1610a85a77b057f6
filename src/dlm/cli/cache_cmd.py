"""`dlm cache ...`: inspect and manage a document's tokenized-section cache.

Each command parses, calls one function of `dlm.actions.cache`, and renders the
result (rich on a terminal, `--json` for machines).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dlm.cli.common import DocArg, JsonOpt, print_json, print_table
from dlm.cli.reporter import console, reported, warn_line

cache_app = typer.Typer(
    help="Inspect and manage the tokenized-section cache (show, build, prune, clear, export, import).",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(help="Path of the portable cache file.", show_default=False)]


@cache_app.command()
@reported
def show(path: DocArg, json_out: JsonOpt = False) -> None:
    """Show the cache's path, entries, size, token dtype, tokenizer and last-run hit rate."""
    from dlm.actions.cache import cache_dir, cache_show, format_hit_rate

    summary = cache_show(path)
    if json_out:
        print_json(summary)
        return
    if summary is None:
        console.print(f"no cache yet at {cache_dir(path)} (run `dlm cache build` or `dlm train`)")
        return
    if summary["error"]:
        warn_line(summary["error"])
    print_table([
        ("path", summary["path"]),
        ("entries", f"{summary['entry_count']:,}"),
        ("size", f"{summary['bytes']:,} bytes on disk ({summary['entry_bytes']:,} in live entries)"),
        ("token dtype", summary["token_dtype"] or "-"),
        ("tokenizer", summary["tokenizer_sha256"] or "-"),
        ("last run", f"{summary['last_run_id'] or '-'}: hit rate {format_hit_rate(summary)}"),
    ])


@cache_app.command()
@reported
def build(path: DocArg, json_out: JsonOpt = False) -> None:
    """Tokenize every row of the document into the cache, without training."""
    from dlm.actions.cache import cache_build
    from dlm.cli.progress import RichTrainSink

    sink = RichTrainSink(quiet=json_out)
    try:
        result = cache_build(path, sink)
    finally:
        sink.close()
    for warning in result.warnings:
        warn_line(warning)
    if json_out:
        print_json(result)
        return
    print_table([
        ("rows", f"{result.rows:,} ({result.files_taken:,} source files)"),
        ("hits", f"{result.hits:,}"),
        ("misses", f"{result.misses:,}"),
        ("seconds", f"{result.seconds:.2f}"),
        ("bytes", f"{result.bytes:,} on disk"),
    ])


@cache_app.command()
@reported
def prune(
    path: DocArg,
    older_than: Annotated[str | None, typer.Option(
        "--older-than", help="Drop entries unused for this long: 30d, 12h, 45m, 90s "
        "(default: training.cache.prune_older_than_days, else 90d).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Drop entries not used for a while, compact segments, reclaim orphaned bytes."""
    from dlm.actions.cache import cache_prune

    result = cache_prune(path, older_than)
    if json_out:
        print_json(result)
        return
    console.print(
        f"pruned {result.removed_entries:,} entries ({result.removed_bytes:,} bytes); "
        f"reclaimed {result.bytes_reclaimed:,} bytes of segments, {result.orphans_removed} orphans"
    )


@cache_app.command()
@reported
def clear(
    path: DocArg,
    force: Annotated[bool, typer.Option("--force", help="Do not ask for confirmation.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Delete every entry of the document's cache."""
    from dlm.actions.cache import cache_clear, cache_dir

    if not force:
        typer.confirm(f"Delete the tokenized-section cache at {cache_dir(path)}?", abort=True)
    result = cache_clear(path)
    if json_out:
        print_json(result)
        return
    console.print(
        f"cleared {result.removed_entries:,} entries ({result.removed_bytes:,} bytes)"
        if result.existed else "no cache to clear"
    )


@cache_app.command("export")
@reported
def export_(path: DocArg, file: FileArg, json_out: JsonOpt = False) -> None:
    """Write the cache's entries to one portable file (a tar)."""
    from dlm.actions.cache import cache_export

    result = cache_export(path, file)
    if result.corrupt_skipped:
        warn_line(f"{result.corrupt_skipped} damaged entries were left out")
    if json_out:
        print_json(result)
        return
    console.print(f"exported {result.entries:,} entries to {result.path} ({result.bytes:,} bytes)")


@cache_app.command("import")
@reported
def import_(path: DocArg, file: FileArg, json_out: JsonOpt = False) -> None:
    """Admit entries from a portable file made with the same tokenizer (checksums verified)."""
    from dlm.actions.cache import cache_import

    result = cache_import(path, file)
    if result.corrupt_skipped:
        warn_line(f"{result.corrupt_skipped} damaged entries were skipped")
    if json_out:
        print_json(result)
        return
    console.print(
        f"imported {result.entries_imported:,} entries ({result.already_present:,} already present)"
    )

"""`dlm cache ...`: inspect and manage a document's tokenized-section cache.

Each command parses, calls one function of `dlm.actions.cache`, and renders the
result (rich on a terminal, `--json` for machines).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dlm.cli.common import DocArg, JsonOpt, print_json, print_table
from dlm.cli.reporter import console, reported, warn_line

if TYPE_CHECKING:
    from dlm.actions.cache import RemoteResult

cache_app = typer.Typer(
    help="Inspect and manage the tokenized-section cache (show, build, prune, clear, export, import, push, pull).",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(help="Path of the portable cache file.", show_default=False)]
RemoteOpt = Annotated[
    str | None,
    typer.Option(
        "--cache-remote",
        help="Remote tier: a folder or fsspec URL (s3://bucket/prefix). Default: "
        "$DLM_CACHE_REMOTE, else training.cache.remote.",
        show_default=False,
    ),
]
AllOpt = Annotated[
    bool,
    typer.Option(
        "--all",
        help="Act on the whole shared store (every document's entries), not only the entries this document alone uses.",
    ),
]


@cache_app.command()
@reported
def show(path: DocArg, json_out: JsonOpt = False) -> None:
    """Show the cache's path, entries, size, token dtype, tokenizer and last-run hit rate."""
    from dlm.actions.cache import cache_show
    from dlm.cli.common import hit_rate_text

    summary = cache_show(path)
    if json_out:
        print_json(summary)
        return
    if summary is None:
        console.print("no cache yet for this document (run `dlm cache build` or `dlm train`)")
        return
    print_table(
        [
            ("path", summary["path"]),
            (
                "entries",
                f"{summary['entry_count']:,} ({summary['shared_entries']:,} shared with other "
                f"documents; {summary['store_entry_count']:,} in the store)",
            ),
            ("size", f"{summary['bytes']:,} bytes on disk ({summary['entry_bytes']:,} in live entries)"),
            ("token dtype", summary["token_dtype"] or "-"),
            ("tokenizer", summary["tokenizer_sha256"] or "-"),
            ("last run", f"{summary['last_run_id'] or '-'}: hit rate {hit_rate_text(summary)}"),
        ]
    )


@cache_app.command()
@reported
def build(
    path: DocArg,
    rehash: Annotated[
        bool,
        typer.Option(
            "--rehash",
            help="Read and hash every source file even when its stat (size, times, inode) "
            "is unchanged; for edits stat cannot see, like writes through a shared mmap.",
        ),
    ] = False,
    cache_remote: RemoteOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Tokenize every row of the document into the cache, without training."""
    from dlm.actions.cache import cache_build
    from dlm.cli.common import skips_text
    from dlm.cli.progress import RichTrainSink

    sink = RichTrainSink(quiet=json_out)
    try:
        result = cache_build(path, sink, rehash=rehash, remote=cache_remote)
    finally:
        sink.close()
    for warning in result.warnings:
        warn_line(warning)
    if json_out:
        print_json(result)
        return
    print_table(
        [
            ("rows", f"{result.rows:,} ({result.files_taken:,} source files)"),
            ("skipped", skips_text(result.files_skipped)),
            ("hits", f"{result.hits:,}"),
            ("misses", f"{result.misses:,}"),
            ("seconds", f"{result.seconds:.2f}"),
            ("bytes", f"{result.bytes:,} on disk"),
        ]
    )


@cache_app.command()
@reported
def prune(
    path: DocArg,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Drop entries unused for this long: 30d, 12h, 45m, 90s "
            "(default: training.cache.prune_older_than_days, else 90d).",
        ),
    ] = None,
    all_: AllOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Drop entries not used for a while that no other document uses (--all: any), compact, reclaim orphans."""
    from dlm.actions.cache import cache_prune

    result = cache_prune(path, older_than, whole_store=all_)
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
    all_: AllOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Delete the entries only this document uses and its cache state (--all: the whole shared store)."""
    from dlm.actions.cache import cache_clear

    if not force:
        what = "the whole shared tokenized-section store" if all_ else "this document's cache entries"
        typer.confirm(f"Delete {what}?", abort=True)
    result = cache_clear(path, whole_store=all_)
    if json_out:
        print_json(result)
        return
    console.print(
        f"cleared {result.removed_entries:,} entries ({result.removed_bytes:,} bytes)"
        if result.existed
        else "no cache to clear"
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
    console.print(f"imported {result.entries_imported:,} entries ({result.already_present:,} already present)")


def _render_moved(result: RemoteResult, verb: str, json_out: bool) -> None:
    for warning in result.warnings:
        warn_line(warning)
    if json_out:
        print_json(result)
        return
    rate = result.bytes / result.seconds / 1e6 if result.seconds > 0 else 0.0
    console.print(
        f"{verb} {result.entries:,} entries in {result.objects:,} objects ({result.bytes:,} bytes, "
        f"{rate:.1f} MB/s) {'to' if verb == 'pushed' else 'from'} {result.remote}"
    )


@cache_app.command()
@reported
def push(path: DocArg, cache_remote: RemoteOpt = None, json_out: JsonOpt = False) -> None:
    """Send the entries of the document's latest run that the remote tier lacks."""
    from dlm.actions.cache import cache_push

    _render_moved(cache_push(path, cache_remote), "pushed", json_out)


@cache_app.command()
@reported
def pull(path: DocArg, cache_remote: RemoteOpt = None, json_out: JsonOpt = False) -> None:
    """Fetch every remote entry made with the document's tokenizer that the local store lacks."""
    from dlm.actions.cache import cache_pull

    _render_moved(cache_pull(path, cache_remote), "pulled", json_out)

"""Helpers shared by commands: arguments, and the two ways results are printed: one JSON
document for machines (`--json`), a key/value table for people."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from dlm.cli.reporter import console

DocArg = Annotated[Path, typer.Argument(help="Path of the .dlm document.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def print_json(value: Any) -> None:
    """Machine output: one JSON document on stdout, keys sorted.

    Every command's `--json` goes through here. `value` is an action's result: a
    dataclass (every field, recursively), a dict, a list or None; anything else JSON
    cannot hold (paths, ids) is printed as its `str`.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


PIPED_WIDTH = 10_000  # columns for output that is not a terminal: a row stays one line


def print_full_table(table: Table) -> None:
    """Print `table` without losing a character: on a terminal, cells wider than their
    share of the width fold onto more lines (never an ellipsis); into a pipe or a file
    (no terminal, no `COLUMNS`), at `PIPED_WIDTH` columns, so each row stays one line
    instead of being cut to rich's default 80."""
    for column in table.columns:
        column.overflow = "fold"
    if console.is_terminal or os.environ.get("COLUMNS"):
        console.print(table)
    else:  # `print(width=)` can only narrow a console: a wide one of its own, on the same file
        Console(file=console.file, width=PIPED_WIDTH, highlight=False, soft_wrap=True).print(table)


def print_table(rows: Sequence[tuple[str, object]]) -> None:
    """Human output: one `key  value` line per row, keys in bold (`print_full_table`)."""
    table = Table(show_header=False, box=None)
    for key, value in rows:
        table.add_row(f"[bold]{key}[/]", str(value))
    print_full_table(table)


def skips_text(counts: dict[str, int]) -> str:
    """`"2 binary, 11 too-large"` (reasons sorted), or `"none"`: how lines name skipped files."""
    return ", ".join(f"{n} {why}" for why, n in sorted(counts.items())) or "none"


def hit_rate_text(summary: dict[str, Any]) -> str:
    """A cache summary's last-run hit rate: `98.4% (1228/1247)`, or `n/a` before the first run."""
    total = summary.get("last_run_total")
    if not total:
        return "n/a"
    hits = summary["last_run_hits"]
    return f"{100 * hits / total:.1f}% ({hits}/{total})"


def lock_mode_from_flags(*, strict: bool = False, update: bool = False, ignore: bool = False) -> Any:
    """The `dlm.lock.LockMode` of `dlm train`'s three lock flags.

    Raises:
        UsageError: more than one flag is set (exit 2).
    """
    from dlm.actions.training import LockMode
    from dlm.errors import UsageError

    chosen = [
        name for name, on in (("--strict-lock", strict), ("--update-lock", update), ("--ignore-lock", ignore)) if on
    ]
    if len(chosen) > 1:
        raise UsageError(f"{' and '.join(chosen)} cannot be combined; pick one")
    return LockMode.STRICT if strict else LockMode.UPDATE if update else LockMode.IGNORE if ignore else LockMode.DEFAULT

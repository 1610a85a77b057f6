"""Helpers shared by commands: arguments, and the two ways results are printed: one JSON
document for machines (`--json`), a key/value table for people."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
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


def print_table(rows: Sequence[tuple[str, object]]) -> None:
    """Human output: one `key  value` line per row, keys in bold."""
    table = Table(show_header=False, box=None)
    for key, value in rows:
        table.add_row(f"[bold]{key}[/]", str(value))
    console.print(table)

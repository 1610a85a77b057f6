"""Helpers shared by commands: arguments, loading the document and its store, printing
JSON or a key/value table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dlm.cli.reporter import console
from dlm.doc import Document, load_document
from dlm.store import Store, open_store

DocArg = Annotated[Path, typer.Argument(help="Path of the .dlm document.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")]


def load_doc_and_store(path: Path) -> tuple[Document, Store]:
    """Parse `path` and open its store (not created). Raises DocError on a bad document."""
    doc = load_document(path)
    return doc, open_store(doc.frontmatter.dlm_id)


def print_json(value: Any) -> None:
    """Machine output: one JSON document on stdout, keys sorted."""
    print(json.dumps(value, indent=2, sort_keys=True, default=str))


def print_table(rows: list[tuple[str, object]]) -> None:
    """Human output: one `key  value` line per row, keys in bold."""
    table = Table(show_header=False, box=None)
    for key, value in rows:
        table.add_row(f"[bold]{key}[/]", str(value))
    console.print(table)

"""Helpers shared by commands: loading the document and its store, printing JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dlm.doc import Document, load_document
from dlm.store import Store, open_store


def load_doc_and_store(path: Path) -> tuple[Document, Store]:
    """Parse `path` and open its store (not created). Raises DocError on a bad document."""
    doc = load_document(path)
    return doc, open_store(doc.frontmatter.dlm_id)


def print_json(value: Any) -> None:
    """Machine output: one JSON document on stdout, keys sorted."""
    print(json.dumps(value, indent=2, sort_keys=True, default=str))

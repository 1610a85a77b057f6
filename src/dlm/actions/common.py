"""What every action starts with: a document path turned into the document, its store,
and its base model's tokenizer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlm.doc import Document
    from dlm.models import BaseModelRef
    from dlm.store import Store

DocPath = str | os.PathLike[str]


def open_document(path: DocPath) -> tuple[Document, Store]:
    """Parse the `.dlm` file at `path` and open its store (the store is not created).

    Raises:
        DocError: the file cannot be read or is not a valid document (`path:line:col`).
    """
    from dlm.doc import load_document
    from dlm.store import open_store

    doc = load_document(Path(path))
    return doc, open_store(doc.frontmatter.dlm_id)


def doc_dir(doc: Document) -> Path | None:
    """The folder relative paths in the document resolve against (None: in-memory)."""
    return doc.path.parent if doc.path else None


def base_tokenizer(doc: Document) -> tuple[BaseModelRef, Any, str]:
    """(base model ref, its tokenizer, the tokenizer's `tokenizer_sha256`).

    The tokenizer loads on first use and the fingerprint comes from the memo when the
    model folder is unchanged (`dlm.tokenize.deferred`), so a run whose rows are all
    cached never imports `transformers`.

    Raises:
        BaseModelError: the base model cannot be resolved or its tokenizer not loaded.
    """
    from dlm.models import resolve_base_model
    from dlm.tokenize.deferred import deferred_tokenizer

    ref = resolve_base_model(doc.frontmatter.base_model, relative_to=doc_dir(doc))
    tokenizer, sha = deferred_tokenizer(ref)
    return ref, tokenizer, sha

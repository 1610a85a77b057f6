"""`dlm init`: write a new, valid document."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from dlm.atomic import atomic_write_text
from dlm.doc.schema import DEFAULT_BASE_MODEL
from dlm.errors import DlmError


def init(
    path: str | os.PathLike[str],
    *,
    base_model: str = DEFAULT_BASE_MODEL,
    sources: Sequence[str | os.PathLike[str]] = (),
    force: bool = False,
) -> Path:
    """Write a fresh document (new ULID, example instruction section) to `path`.

    Source folders are written relative to the document's folder.

    Returns:
        The path written.

    Raises:
        DlmError: `path` exists and `force` is false; a source folder does not exist.
    """
    from dlm.doc import new_document

    path = Path(path)
    if path.exists() and not force:
        raise DlmError(f"{path}: already exists; pick another path or pass --force to overwrite")
    rel_sources = []
    for src in map(Path, sources):
        if not src.is_dir():
            raise DlmError(f"--source {src}: not a folder; pass a directory to ingest")
        rel_sources.append(os.path.relpath(src.resolve(), path.resolve().parent))
    atomic_write_text(path, new_document(base_model=base_model, sources=rel_sources))
    return path

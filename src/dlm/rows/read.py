"""Reading one source file into row text.

Rules:
- a file with a NUL byte in its first 8 KiB is binary and skipped (`"binary"`);
- a file that cannot be read is skipped (`"unreadable"`), as is one whose size grew
  past the directive's cap after the walk (`"too-large"`);
- text is decoded as UTF-8; undecodable bytes become U+FFFD (the row is kept and
  counted as lossy), so one stray Latin-1 byte does not drop a whole file; a file
  name that is not valid UTF-8 is named the same way (also lossy);
- the row text names the file, so the model learns where code lives:

      <relpath>
      ```
      <content>
      ```
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import BinaryIO

from dlm.rows.types import PAIR_KINDS, FileRow, RowSpec, TextRow

BINARY_SNIFF_BYTES = 8192


@dataclass(frozen=True)
class FileText:
    """A source file decoded to text. `lossy`: some bytes were replaced by U+FFFD."""

    text: str
    lossy: bool


def decode_file_bytes(data: bytes) -> FileText | str:
    """Decode file content; returns `FileText`, or the skip reason `"binary"`."""
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        return "binary"
    try:
        return FileText(data.decode("utf-8"), lossy=False)
    except UnicodeDecodeError:
        return FileText(data.decode("utf-8", errors="replace"), lossy=True)


def read_file_text(row: FileRow, max_bytes: int | None = None) -> FileText | str:
    """Read and decode `row.path`; returns `FileText` or a skip reason string.

    With `max_bytes`, at most `min(max_bytes, size at open) + 1` bytes are read: one
    byte past the size tells a file that grew past the cap, and no buffer is sized by
    the cap alone (a 6-byte file under a 1 GiB cap reads 7 bytes).
    """
    try:
        with open(row.path, "rb") as fh:
            data = fh.read() if max_bytes is None else _read_capped(fh, max_bytes)
    except OSError:
        return "unreadable"
    if max_bytes is not None and len(data) > max_bytes:
        return "too-large"
    return decode_file_bytes(data)


READ_CHUNK = 1 << 20


def _read_capped(fh: BinaryIO, max_bytes: int) -> bytes:
    """The file's bytes, or its first `max_bytes + 1` when it is larger. Buffers are
    sized by the file, never by the cap: `min(max_bytes, size) + 1` bytes, then (only
    for a file that grew since its stat, or one that reports size 0 as /proc does)
    chunks of `READ_CHUNK` up to one byte past the cap."""
    size = os.fstat(fh.fileno()).st_size
    parts = [fh.read(min(max_bytes, size) + 1)]
    got = len(parts[0])
    while size < got <= max_bytes:
        more = fh.read(min(READ_CHUNK, max_bytes + 1 - got))
        if not more:
            break
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def display_relpath(relpath: str) -> tuple[str, bool]:
    """(name as row text, lossy): a file name that is not valid UTF-8 (undecodable
    bytes kept by the OS as surrogate escapes) is named with U+FFFD in their place."""
    if relpath.isascii():
        return relpath, False
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        raw = relpath.encode("utf-8", "surrogateescape")
        return raw.decode("utf-8", errors="replace"), True
    return relpath, False


def render_file_row(relpath: str, content: str) -> str:
    """Row text for a source file: its relative path (see `display_relpath`), then its
    content fenced."""
    if not content.endswith("\n"):
        content += "\n"
    name, _ = display_relpath(relpath)
    return f"{name}\n```\n{content}```\n"


@dataclass(frozen=True)
class ReadFile:
    """A source file read and rendered into row text."""

    spec: RowSpec
    lossy: bool


def text_row_spec(row: TextRow) -> RowSpec:
    """The encoding spec of an in-body row."""
    return RowSpec(row.kind, row.text, row.prompt_text if row.kind in PAIR_KINDS else None)


def read_file_row(row: FileRow) -> ReadFile | str:
    """Read, decode and render a source file; returns `ReadFile` or a skip reason."""
    got = read_file_text(row, row.max_bytes)
    if isinstance(got, str):
        return got
    _, lossy_name = display_relpath(row.relpath)
    return ReadFile(RowSpec("source", render_file_row(row.relpath, got.text)), got.lossy or lossy_name)

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

from dataclasses import dataclass

from dlm.rows.types import FileRow, RowSpec, TextRow

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
    """Read and decode `row.path`; returns `FileText` or a skip reason string."""
    try:
        with open(row.path, "rb") as fh:
            data = fh.read() if max_bytes is None else fh.read(max_bytes + 1)
    except OSError:
        return "unreadable"
    if max_bytes is not None and len(data) > max_bytes:
        return "too-large"
    return decode_file_bytes(data)


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
    return RowSpec(row.kind, row.text, row.prompt_text if row.kind == "instruction" else None)


def read_file_row(row: FileRow) -> ReadFile | str:
    """Read, decode and render a source file; returns `ReadFile` or a skip reason."""
    got = read_file_text(row, row.max_bytes)
    if isinstance(got, str):
        return got
    _, lossy_name = display_relpath(row.relpath)
    return ReadFile(RowSpec("source", render_file_row(row.relpath, got.text)), got.lossy or lossy_name)

"""Read a `.dlm` text or file into a `Document`, reporting every problem at once."""

from __future__ import annotations

from pathlib import Path

from dlm.doc.body import parse_body
from dlm.doc.frontmatter import SplitText, read_frontmatter, split_text, value_position
from dlm.doc.model import Document
from dlm.doc.problems import DocParseError, DocProblem
from dlm.errors import DocError

STRING_LABEL = "<string>"


def _normalize(text: str) -> str:
    """Drop a UTF-8 BOM and make every newline `\\n` (positions then match editors)."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def field_where(doc: Document, *loc: str | int) -> str:
    """`path:line:col` of the frontmatter value at key path `loc` (as parse errors
    place theirs), for messages about a value found bad after parsing; `path` alone
    when the document does not write the key (a default)."""
    where = str(doc.path) if doc.path is not None else STRING_LABEL
    split = split_text(_normalize(doc.source_text)) if doc.source_text else None
    pos = value_position(split.yaml_text, loc) if isinstance(split, SplitText) else None
    return f"{where}:{pos[0]}:{pos[1]}" if pos is not None else where


def parse_document(text: str, path: Path | None = None) -> Document:
    """Parse the text of a `.dlm` file.

    Args:
        text: the whole file as text (any of `\\n`, `\\r\\n` newlines; a BOM is allowed).
        path: where it came from; named in errors (`<string>` when None).

    Returns:
        The `Document`; `source_text` is `text` unchanged.

    Raises:
        DocParseError (a DocError): one `path:line:col: message` line per problem,
            covering the frontmatter and the body together.
    """
    where = str(path) if path is not None else STRING_LABEL
    split = split_text(_normalize(text))
    if isinstance(split, DocProblem):
        raise DocParseError(where, [split])
    frontmatter = read_frontmatter(split.yaml_text)
    sections, problems = parse_body(split.body_lines, split.body_first_line)
    if isinstance(frontmatter, list):
        raise DocParseError(where, frontmatter + problems)
    if problems:
        raise DocParseError(where, problems)
    return Document(frontmatter, sections, path, text)


def load_document(path: str | Path) -> Document:
    """Read and parse the `.dlm` file at `path` (bytes decoded as strict UTF-8).

    Raises:
        DocError: the file is missing, unreadable or not UTF-8.
        DocParseError: the text has problems (see `parse_document`).
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DocError(f"{path}: no such file; create one with `dlm init {path}`") from None
    except IsADirectoryError:
        raise DocError(f"{path}: is a folder, not a .dlm file") from None
    except OSError as exc:
        raise DocError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        col = exc.start - data.rfind(b"\n", 0, exc.start)
        raise DocError(
            f"{path}:{line}:{col}: not UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8"
        ) from None
    return parse_document(text, path)

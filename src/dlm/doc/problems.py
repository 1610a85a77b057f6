"""Problems found in a `.dlm` document and the error that reports them all at once.

Every problem has a 1-based line and column in the file. `DocParseError` joins them,
sorted by position, one `path:line:col: message` per line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dlm.errors import DocError


@dataclass(frozen=True, order=True)
class DocProblem:
    """One problem: where (1-based `line`, `col` in the file) and what, with the way out."""

    line: int
    col: int
    message: str

    def render(self, where: str) -> str:
        """`where:line:col: message`."""
        return f"{where}:{self.line}:{self.col}: {self.message}"


class DocParseError(DocError):
    """A `.dlm` document has one or more problems.

    Attributes:
        where: the file path as given, or `<string>` for text without a path.
        problems: every problem found, sorted by position.
    """

    def __init__(self, where: str, problems: Iterable[DocProblem]):
        self.where = where
        self.problems: tuple[DocProblem, ...] = tuple(sorted(problems))
        super().__init__("\n".join(p.render(where) for p in self.problems))


def short_repr(value: object, limit: int = 40) -> str:
    """`repr(value)` cut to `limit` characters, for quoting a bad value in a message."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."

"""The parsed `.dlm` document: frontmatter plus an ordered tuple of body sections.

Positions (`line`) are 1-based lines in the file, for messages and row origins; they
are left out of equality so a document equals its serialized-and-reparsed self.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from dlm.doc.schema import Frontmatter


@dataclass(frozen=True)
class ProseSection:
    """Markdown text trained as one continued-pretraining row.

    `text`: the section's lines with outer blank lines removed (no trailing newline).
    `line`: its first non-blank line.
    """

    text: str
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class QAPair:
    """One question and its answer (both stripped): in an instruction section, trained
    as one supervised row; in a probe section, scored and never trained on.

    `keys`: strings a correct answer must contain (`### Keys`, one per line), for scoring.
    `line`: the line of its `### Q`.
    """

    question: str
    answer: str
    line: int = field(default=0, compare=False)
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstructionSection:
    """The Q/A pairs after one `::instruction::` line (its `line`), in order."""

    pairs: tuple[QAPair, ...]
    line: int = field(default=0, compare=False)


@dataclass(frozen=True)
class ProbeSection:
    """The Q/A pairs after one `::probe::` line (its `line`): questions the adapter is
    scored on by `dlm eval` and at the end of `dlm train`, never trained on."""

    pairs: tuple[QAPair, ...]
    line: int = field(default=0, compare=False)


Section = ProseSection | InstructionSection | ProbeSection


def document_sha256(text: str | bytes) -> str:
    """`sha256:<64 hex>` of a `.dlm` file's exact bytes (str is encoded as UTF-8)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Document:
    """A parsed `.dlm` document.

    Attributes:
        frontmatter: the validated frontmatter.
        sections: body sections in file order (blank ones dropped).
        path: the file it was read from, or None for text parsed in memory.
        source_text: the exact text parsed (BOM and newlines as in the file); empty
            for a document built in memory.
    """

    frontmatter: Frontmatter
    sections: tuple[Section, ...]
    path: Path | None = field(default=None, compare=False)
    source_text: str = field(default="", compare=False, repr=False)

    @property
    def dlm_sha256(self) -> str:
        """`sha256:<hex>` of the file's exact bytes (what the determinism lock pins).

        Raises:
            ValueError: the document was built in memory, not parsed from text.
        """
        if not self.source_text:
            raise ValueError("document has no source text; serialize and parse it first")
        return document_sha256(self.source_text)

    def origin(self, section: Section | QAPair) -> str:
        """`path:line` of a section or pair (`<string>` without a path), for row origins."""
        return f"{self.path if self.path is not None else '<string>'}:{section.line}"

"""Statements of a Markdown table: a README's table of options, settings or endpoints
states one fact per cell, which the prose rules (`dlm.rows.facts.prose`) then ask about
as they ask about any sentence.

A table is a pipe table as GitHub Flavored Markdown writes it (a header row, then a
delimiter row of `---` cells, then body rows, every row led by `|`). Its first column
names what each row is about; a column headed as a description (`DESCRIPTIONS`:
"Description", "What it does", ...) says what that is; every other column holds a
value of it. Each value cell of a body row is one statement:

    | Option | What it does | Default |
    | `--from <address>` | The sender of every reminder | `desk@example.org` |

    -> The default of `--from <address>` is `desk@example.org` (the sender of every reminder).

The value is what the statement asks (`dlm.rows.facts.prose`: its salient spans); the
row's name and description are what it is asked by. The header is lowercased unless it
is an acronym (`TTL`) or mixed case (`maxAge`), and a plural one takes "are" ("The
aliases of `gbk` are ..."); the description follows in brackets when it is at most
`MAX_DESCRIPTION_WORDS` words and one sentence, so the answer says what the value is
for. A column headed by a question (`Why?`, `When to use`), a function word (`For`), a
comma or more than `MAX_HEADING_WORDS` words is neither a value nor a description. A
row without a name, or a cell that is empty, a dash or `?` or of more than
`MAX_VALUE_WORDS` words, gives nothing; a cell without a salient span ("off", "yes", a
check mark) gives no fact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import NamedTuple

# header cells of a column that says what the row's thing is, not a value of it
DESCRIPTIONS = frozenset(
    {"description", "what it does", "meaning", "purpose", "notes", "note", "details", "explanation", "effect"}
    | {"summary", "comment", "comments"}
)
MAX_DESCRIPTION_WORDS = 12
MAX_HEADING_WORDS = 4
MAX_VALUE_WORDS = 8  # a longer cell says what something is, not a value of it


class CellStatement(NamedTuple):
    """One value cell of a table row as a sentence.

    Attributes:
        sentence: "The default of `--from` is `desk@x.org` (the sender)."
        value: the cell as it stands in the sentence (`` `desk@x.org` ``): what is asked.
        name: the row's first cell, what the statement is about (the probe split's unit).
        at: where `value` starts in `sentence` (a span of the name is not the value's).
    """

    sentence: str
    value: str
    name: str
    at: int


_DELIMITER = re.compile(r"\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?")
_QUESTION_WORDS = frozenset("what which how when where why who whether".split())
_EMPTY = frozenset({"", "-", "--", "—", "–", "n/a", "?"})
_FUNCTION_WORDS = frozenset("for of to in on at by with from as and or if".split())


def table_at(lines: Sequence[str], n: int) -> bool:
    """Whether a pipe table starts at `lines[n]`: a row led by `|`, then a delimiter row."""
    return (
        lines[n].lstrip().startswith("|")
        and n + 1 < len(lines)
        and _DELIMITER.fullmatch(lines[n + 1].strip()) is not None
    )


def table_statements(
    lines: Sequence[str], n: int, clean: Callable[[str], str]
) -> tuple[int, list[tuple[int, list[CellStatement]]]]:
    """The statements of the table starting at `lines[n]` (`table_at` holds there).

    Args:
        lines: the text's lines.
        n: 0-based index of the header row.
        clean: what a cell's text goes through first (links to their text, emphasis
            markers dropped: `dlm.rows.facts.markdown.clean`, the rule for a line of prose).

    Returns:
        (the 0-based index of the first line after the table, [(1-based line of the row,
        its statements)] for each row that states something).
    """
    header = [clean(c) for c in cells(lines[n])]
    end = n + 2
    rows: list[tuple[int, list[CellStatement]]] = []
    while end < len(lines) and lines[end].lstrip().startswith("|"):
        said = row_statements(header, [clean(c) for c in cells(lines[end])])
        if said:
            rows.append((end + 1, said))
        end += 1
    return end, rows


def cells(row: str) -> list[str]:
    """The cells of a table row, stripped: split at each `|` not escaped as `\\|` and
    not inside a code span, the leading and trailing pipes dropped."""
    found: list[str] = []
    current: list[str] = []
    in_code = False
    text = row.strip()
    text = text[1:] if text.startswith("|") else text
    text = text[:-1] if text.endswith("|") and not text.endswith("\\|") else text
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and text[i + 1 : i + 2] == "|":
            current.append("|")
            i += 2
            continue
        if char == "`":
            in_code = not in_code
        if char == "|" and not in_code:
            found.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        i += 1
    found.append("".join(current).strip())
    return found


def row_statements(header: Sequence[str], row: Sequence[str]) -> list[CellStatement]:
    """One statement per value cell of a body row (module rules); [] for a row with no name."""
    if len(header) < 2 or not row or row[0].strip().lower() in _EMPTY:
        return []
    name = row[0].strip()
    kinds = [_column(h) for h in header]
    description = next(
        (_description(cell) for kind, cell in zip(kinds, row, strict=False) if kind == "description"), None
    )
    said = []
    for i, (kind, cell) in enumerate(zip(kinds, row, strict=False)):
        value = cell.strip().rstrip(".")
        if i == 0 or kind != "value" or value.lower() in _EMPTY or len(value.split()) > MAX_VALUE_WORDS:
            continue
        heading = _heading(header[i])
        opening = f"The {heading} of {name} {'are' if _plural(heading) else 'is'} "
        gloss = f" ({description})." if description else "."
        said.append(CellStatement(f"{opening}{value}{gloss}", value, name, len(opening)))
    return said


def _column(heading: str) -> str:
    """The kind of a header cell's column: "description", "value", or "" for neither
    (empty, code, a question, a function word, a comma or more than `MAX_HEADING_WORDS`
    words: no noun to say "the ... of" with)."""
    words = heading.strip().rstrip("?:").lower().split()
    if not words or "`" in heading:
        return ""
    if " ".join(words) in DESCRIPTIONS:
        return "description"
    if words[0] in _QUESTION_WORDS or heading.strip().endswith("?") or "," in heading:
        return ""
    if len(words) > MAX_HEADING_WORDS or (len(words) == 1 and words[0] in _FUNCTION_WORDS):
        return ""
    return "value"


def _plural(heading: str) -> bool:
    """Whether a header reads as a plural noun ("aliases", "binary names"): its last word
    ends in `s`, not in `ss`, `us` or `is` ("class", "status", "basis")."""
    last = heading.split()[-1] if heading.split() else ""
    return last.islower() and last.endswith("s") and not last.endswith(("ss", "us", "is"))


def _heading(heading: str) -> str:
    """A header cell as it reads inside a sentence: lowercased, unless an acronym or
    mixed case."""
    text = heading.strip().rstrip(":")
    keep = any(w.isupper() and len(w) > 1 or (w[1:] != w[1:].lower()) for w in text.split())
    return text if keep else text.lower()


def _description(cell: str) -> str | None:
    """A description cell as a bracketed gloss: one sentence of at most
    `MAX_DESCRIPTION_WORDS` words, its first letter lowercased where the word is not a
    name, without the final full stop; None otherwise."""
    text = cell.strip().rstrip(".")
    if not text or text.lower() in _EMPTY or len(text.split()) > MAX_DESCRIPTION_WORDS or re.search(r"[.!?]\s", text):
        return None
    first = text.split()[0]
    if first[:1].isupper() and first[1:] == first[1:].lower():
        text = text[:1].lower() + text[1:]
    return text

"""Markdown and text read block by block, for the prose rules (`dlm.rows.facts.prose`)
and the language test (`dlm.rows.facts.language`).

Rules:
- a block is a paragraph, a list item or a block quote's text; its lines join with
  newlines. A list item (its marker dropped) is a `ListItem`, which the prose rules end
  with a full stop where it reads as a sentence; a code span it defines by a noun
  phrase ("`--port`: the port to listen on") is said to be it ("`--port` is the port to
  listen on."), a file to hold it ("`lib/cli.py` holds the command line.");
- skipped: a leading `---` front matter, fenced code (```` ``` ```` or `~~~`),
  indented code, a reStructuredText directive (`.. note::`), headings (ATX `#` and
  setext underlines), HTML lines; a heading or code ends what a pronoun can refer to;
- a pipe table is skipped as prose; read for statements (`tables`), each of its rows
  that states something is a block of its own (`dlm.rows.facts.tables`), and the
  table too ends what a pronoun can refer to;
- in a block, links keep their text (inline and reference links), footnote marks and
  emphasis markers go, backticks stay, and a code span keeps its bytes (`__init__.py`,
  `**/*.py`); a reStructuredText inline literal (``` ``x`` ```) is one code span.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from dlm.rows.facts.tables import CellStatement, table_at, table_statements

_HEADING = re.compile(r"#{1,6}(?:\s|$)")  # CommonMark's ATX heading: `#tag` is text
_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
_REF_LINK = re.compile(r"!?\[([^\]^][^\]]*)\]\[[^\]]*\]")
_CODE_REF_LINK = re.compile(r"\[(`[^`\n]+`)\]\[[^\]]*\]")  # [`dns.resolve()`][]
# a list item defining a code span: `` `--port`: ... `` (a word before a colon is as often a
# label, "Note: the cache ...", as a term)
_DEFINITION = re.compile(r"(`[^`\n]+`):\s+(\S.*)$", re.DOTALL)
_FILE = re.compile(r"/|\.\w{1,5}$")  # a path, or a file name with its extension
_DETERMINERS = frozenset("the a an its their this one each every all".split())
_FOOTNOTE = re.compile(r"\[\^[^\]\s]+\]")
_EMPHASIS = re.compile(r"(\*\*|__|(?<![\w`])[*_](?=\S)|(?<=\S)[*_](?![\w`]))")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
_SET_ASIDE = re.compile(r"`\x00(\d+)`")  # a code span `clean` set aside: NUL and its index


def prose_text(text: str) -> str:
    """The prose of a Markdown or text `text`, for telling its language
    (`dlm.rows.facts.language`): its prose blocks (`blocks`: no code, tables or
    headings) without their code spans, joined by blank lines."""
    return "\n\n".join(re.sub(r"`[^`\n]*`", " ", block) for _, block in blocks(text) if isinstance(block, str))


def blocks(text: str, tables: bool = False) -> Iterator[tuple[int, str | list[CellStatement] | None]]:
    """(1-based first line, text) of each prose block; (line, None) at a heading or
    code, where a pronoun's reference ends. Lines of a block join with newlines. With
    `tables`, each row of a table that states something is (its line, its statements:
    `dlm.rows.facts.tables`), and the table ends a pronoun's reference too."""
    lines = text.split("\n")
    i = 0
    if lines and lines[0].strip() == "---":  # front matter
        end = next((j for j in range(1, len(lines)) if lines[j].strip() in ("---", "...")), None)
        i = end + 1 if end is not None else 0
    block: list[str] = []
    start = 0
    item = False  # the block is a list item
    fence: str | None = None
    after_table = i
    for n in range(i, len(lines)):
        if n < after_table:
            continue  # a row of the table read below
        raw = lines[n]
        if tables and fence is None and table_at(lines, n):
            if block:
                yield start, _joined(block, item)
                block = []
            after_table, rows = table_statements(lines, n, clean)
            yield from rows
            yield after_table, None
            continue
        stripped = raw.strip()
        if fence is not None or _FENCE.match(raw):
            marker = stripped[:3]
            fence = None if fence is not None and stripped.startswith(fence) else fence or marker
            kind = "code"
        elif not stripped:
            kind = "blank"
        elif (
            _HEADING.match(stripped)
            or re.fullmatch(r"[=-]{3,}", stripped)
            or raw.startswith(("    ", "\t", ".. "))  # indented code, a reStructuredText directive
        ):
            kind = "code"
        elif stripped.startswith(("|", "<")):
            kind = "blank"
        else:
            kind = "item" if _LIST.match(raw) else "text"
        if kind != "text" and block:
            yield start, _joined(block, item)
            block = []
        if kind == "code":
            yield n + 1, None
        elif kind in ("text", "item"):
            if not block:
                start, item = n + 1, kind == "item"
            block.append(clean(_LIST.sub("", raw, count=1) if kind == "item" else raw))
    if block:
        yield start, _joined(block, item)


class ListItem(str):
    """A list item's text (its marker dropped), which may end without a full stop: the
    prose rules end it with one where it reads as a sentence (`dlm.rows.facts.prose`)."""


def _joined(lines: list[str], item: bool) -> str:
    """A block's lines joined by newlines; a list item's as a `ListItem`. A list item
    that defines a code span by a noun phrase (one opening with a determiner or a code
    span: "- `--port`: the port to listen on") says so ("`--port` is the port to listen
    on."; a file "holds" what it lists: "`lib/swarm.mjs` holds `detectSwarm`.")."""
    text = "\n".join(lines)
    if not item:
        return text
    definition = _DEFINITION.match(text)
    if definition:
        term, said = definition.groups()
        first = said.split()[0]
        if said[:1] == "`" or first.lower() in _DETERMINERS:
            said = said[:1].lower() + said[1:] if first.lower() in _DETERMINERS else said
            # a file holds what it lists ("`lib/swarm.mjs`: `detectSwarm` and the alert text")
            text = f"{term} {'holds' if _FILE.search(term.strip('`')) else 'is'} {said}"
            text += "" if text.rstrip()[-1:] in (".", "!", "?") else "."
    return ListItem(text)


def clean(line: str) -> str:
    """A prose line without its quote marker, links and emphasis; a reStructuredText
    inline literal (``x``, also Markdown's code span written with two backticks) is
    written as one code span (`x`); one that holds a backtick stays as written. A code
    span is kept byte for byte (`**/*.py`, `__init__.py`: CommonMark reads no emphasis
    inside one); outside them, a link keeps its text (inline, `[text][label]`,
    `[text][]`) and a footnote mark (`[^2]`) goes."""
    line = re.sub(r"``([^`]+)``", r"`\1`", line.strip().lstrip(">").strip())
    line = _CODE_REF_LINK.sub(r"\1", line)
    spans: list[str] = []

    def set_aside(match: re.Match[str]) -> str:
        spans.append(match.group(0))
        return f"`\0{len(spans) - 1}`"

    line = _CODE_SPAN.sub(set_aside, line)
    line = _EMPHASIS.sub("", _LINK.sub(r"\1", _FOOTNOTE.sub("", _REF_LINK.sub(r"\1", line))))
    return _SET_ASIDE.sub(lambda m: spans[int(m.group(1))], line)

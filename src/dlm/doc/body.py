"""The `.dlm` body grammar: markdown split into prose, instruction and probe sections.

Read line by line; only lines outside fenced code blocks are interpreted, and only
at column 1:

    ::instruction::      starts an instruction section (ends the current section)
    ::prose::            starts a prose section (ends the current section)
    ::probe::            starts a probe section: Q/A pairs scored, never trained on
    ::other::            an error: unknown directive
    # Heading            in prose: starts a new prose section (a level-1 heading)
    ### Q / ### A        in an instruction or probe section: starts a question / its answer
    ### Keys             after an answer: one string per line (a leading `- ` is dropped)
                         that a correct answer must contain, for scoring; never trained on

A fence opens on a line of 3+ backticks or tildes indented at most 3 spaces and
closes on a line of at least as many of the same character (CommonMark rules); every
line from the opening to the closing fence is plain text. A fence left open at the
end of the body is an error, so it cannot silently swallow later sections.

Prose text keeps its lines, less outer blank lines; question and answer text is
stripped. Blank prose sections are dropped. Problems (an `### A` without a `### Q`, a
question without an answer, an empty question or answer, text before the first
`### Q`, an instruction section with no pairs, `### Keys` before an answer or with no
key, an unknown directive) are collected, all of them, with their line.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from dlm.doc.model import InstructionSection, ProbeSection, ProseSection, QAPair, Section
from dlm.doc.problems import DocProblem

DIRECTIVES = ("instruction", "prose", "probe")
_DIRECTIVE = re.compile(r"::([^:\s]*)::[ \t]*")
_FENCE_OPEN = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")
_FENCE_CLOSE = re.compile(r" {0,3}(`+|~+)[ \t]*")
_QUESTION = re.compile(r"###[ \t]+Q[ \t]*")
_ANSWER = re.compile(r"###[ \t]+A[ \t]*")
_KEYS = re.compile(r"###[ \t]+Keys[ \t]*")
_MARKER = re.compile(r"^[-*](?:[ \t]+|$)")
_HEADING = re.compile(r"#(?:[ \t].*)?")


def is_heading(line: str) -> bool:
    """True for a level-1 ATX heading line (`# Title`, or `#` alone), which splits prose."""
    return _HEADING.fullmatch(line) is not None


class _Fence:
    """Tracks whether the current line is inside a fenced code block."""

    def __init__(self) -> None:
        self.marker = ""  # e.g. "```"; empty when no fence is open
        self.line = 0

    def is_code(self, line: str, lineno: int) -> bool:
        """Step over `line`; True when it is code (a fence line or inside one)."""
        if self.marker:
            close = _FENCE_CLOSE.fullmatch(line)
            if close and close.group(1)[0] == self.marker[0] and len(close.group(1)) >= len(self.marker):
                self.marker = ""
            return True
        m = _FENCE_OPEN.fullmatch(line)
        if m and not (m.group(1)[0] == "`" and "`" in m.group(2)):
            self.marker, self.line = m.group(1), lineno
            return True
        return False


def _key(line: str) -> str:
    """One key of a `### Keys` block: the line stripped, less a leading list marker
    (`- ` or `* `; a marker alone, `-`, is an empty key, never the key `-`)."""
    return _MARKER.sub("", line.strip(), count=1).strip()


def _strip_blank_ends(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    keep = [i for i, (_, text) in enumerate(lines) if text.strip()]
    return lines[keep[0] : keep[-1] + 1] if keep else []


class _BodyParser:
    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.problems: list[DocProblem] = []
        self.mode = "prose"
        self.prose: list[tuple[int, str]] = []
        self.section_line = 0
        self.pairs: list[QAPair] = []
        # pairs: "pre" (before a Q), "q", "a", "keys", "orphan" (A without Q)
        self.state = "pre"
        self.q_line = self.a_line = self.k_line = 0
        self.q_buf: list[str] = []
        self.a_buf: list[str] = []
        self.k_buf: list[str] = []
        self.section_problem = False

    def problem(self, line: int, message: str) -> None:
        self.problems.append(DocProblem(line, 1, message))

    # --- prose ---
    def flush_prose(self) -> None:
        lines = _strip_blank_ends(self.prose)
        if lines:
            self.sections.append(ProseSection("\n".join(t for _, t in lines), lines[0][0]))
        self.prose = []

    # --- instruction ---
    def start_instruction(self, lineno: int, mode: str = "instruction") -> None:
        self.mode, self.section_line, self.pairs = mode, lineno, []
        self.state, self.section_problem = "pre", False

    def finish_pair(self) -> None:
        question, answer = "\n".join(self.q_buf).strip(), "\n".join(self.a_buf).strip()
        if not question:
            self.problem(self.q_line, "empty question under '### Q'; write the question below it")
        if not answer:
            self.problem(self.a_line, "empty answer under '### A'; write the answer below it")
        keys = tuple(k for k in (_key(line) for line in self.k_buf) if k)
        for offset, line in enumerate(self.k_buf, start=1):
            if line.strip() and not _key(line):
                self.problem(
                    self.k_line + offset, "a list marker with no key under '### Keys'; write the key or remove the line"
                )
        if self.state == "keys" and not keys:
            self.problem(self.k_line, "'### Keys' lists no key; write one per line below it, or remove it")
        if question and answer:
            self.pairs.append(QAPair(question, answer, self.q_line, keys))

    def close_open_pair(self) -> None:
        if self.state == "q":
            self.problem(
                self.q_line,
                "'### Q' has no answer; add a '### A' line and the answer after the question",
            )
        elif self.state in ("a", "keys"):
            self.finish_pair()

    def end_instruction(self) -> None:
        self.close_open_pair()
        if self.pairs:
            kind = ProbeSection if self.mode == "probe" else InstructionSection
            self.sections.append(kind(tuple(self.pairs), self.section_line))
        elif not self.section_problem and self.state == "pre":
            self.problem(
                self.section_line,
                f"{self.mode} section has no '### Q' / '### A' pairs; add one or remove this line",
            )

    def instruction_line(self, line: str, lineno: int, code: bool) -> None:
        if not code and _QUESTION.fullmatch(line):
            self.close_open_pair()
            self.state, self.q_line, self.q_buf, self.k_buf = "q", lineno, [], []
        elif not code and _KEYS.fullmatch(line):
            if self.state != "a":
                self.problem(lineno, "'### Keys' must follow an answer ('### A'); move it below the answer")
                self.section_problem, self.state = True, "orphan"
            else:
                self.state, self.k_line, self.k_buf = "keys", lineno, []
        elif not code and _ANSWER.fullmatch(line):
            if self.state != "q":
                self.problem(lineno, "'### A' without a preceding '### Q'; add the question above it")
                self.section_problem, self.state = True, "orphan"
            else:
                self.state, self.a_line, self.a_buf = "a", lineno, []
        elif self.state == "q":
            self.q_buf.append(line)
        elif self.state == "a":
            self.a_buf.append(line)
        elif self.state == "keys":
            self.k_buf.append(line)
        elif self.state == "pre" and line.strip():
            self.problem(
                lineno,
                f"text before the first '### Q' of an {self.mode} section; start a pair with '### Q'",
            )
            self.section_problem, self.state = True, "orphan"

    # --- driver ---
    def end_section(self) -> None:
        if self.mode == "prose":
            self.flush_prose()
        else:
            self.end_instruction()

    def directive(self, name: str, lineno: int) -> None:
        if name not in DIRECTIVES:
            close = difflib.get_close_matches(name, DIRECTIVES, n=1, cutoff=0.5)
            hint = f"did you mean '::{close[0]}::'?" if close else "known: ::instruction::, ::prose::, ::probe::"
            self.problem(lineno, f"unknown directive '::{name}::'; {hint}")
            return
        self.end_section()
        if name in ("instruction", "probe"):
            self.start_instruction(lineno, name)
        else:
            self.mode = "prose"

    def feed(self, lines: Sequence[str], first_line: int) -> None:
        fence = _Fence()
        for offset, line in enumerate(lines):
            lineno = first_line + offset
            code = fence.is_code(line, lineno)
            directive = None if code else _DIRECTIVE.fullmatch(line)
            if directive:
                self.directive(directive.group(1), lineno)
            elif self.mode in ("instruction", "probe"):
                self.instruction_line(line, lineno, code)
            else:
                if not code and is_heading(line):
                    self.flush_prose()
                self.prose.append((lineno, line))
        if fence.marker:
            self.problem(
                fence.line,
                f"code fence opened here is never closed; add a closing {fence.marker} line",
            )
        self.end_section()


def parse_body(lines: Sequence[str], first_line: int) -> tuple[tuple[Section, ...], list[DocProblem]]:
    """Parse body `lines` (without newlines) whose first is file line `first_line`.

    Returns the sections in order and every problem found (empty when valid).
    """
    parser = _BodyParser()
    parser.feed(lines, first_line)
    return tuple(parser.sections), parser.problems

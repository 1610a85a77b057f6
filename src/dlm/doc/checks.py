"""Warnings about a document that parses: pairs the report would count in a misleading way.

A problem (`dlm.doc.problems`) stops the run; these do not, they are printed with the
run's other notes (`dlm train`, `dlm show`):

- a probe that asks the question of an instruction pair (whitespace and case aside): the
  adapter was trained on it, so it measures recall, not transfer;
- a probe that asks the question of an earlier probe: it is scored and counted twice.
"""

from __future__ import annotations

from dlm.doc.model import Document, InstructionSection, ProbeSection


def _asked(question: str) -> str:
    return " ".join(question.casefold().split())


def pair_notes(doc: Document) -> list[str]:
    """One line per probe that repeats a trained pair's question or an earlier probe's
    (module docstring), `path:line: ...` in document order."""
    name = str(doc.path) if doc.path else "<doc>"
    trained = {_asked(p.question): p.line for s in doc.sections if isinstance(s, InstructionSection) for p in s.pairs}
    probes: dict[str, int] = {}
    notes = []
    for section in doc.sections:
        if not isinstance(section, ProbeSection):
            continue
        for pair in section.pairs:
            asked = _asked(pair.question)
            if asked in trained:
                notes.append(
                    f"{name}:{pair.line}: this probe asks the instruction pair's question (line {trained[asked]}): "
                    "the adapter was trained on it, so it measures recall, not transfer; reword it or remove it"
                )
            elif asked in probes:
                notes.append(
                    f"{name}:{pair.line}: this probe repeats the probe at line {probes[asked]} and is counted "
                    "twice in the report; remove one"
                )
            probes.setdefault(asked, pair.line)
    return notes

"""The general-ability guard set: 41 short passages, written for dlm, of prose in
English, French, German and Spanish and of code in Python, C, JavaScript, Rust, Go and
SQL, each 80 to 200 tokens with the SmolLM2 tokenizer (README.md beside them has the
license and the rules they follow).

A document adapter should leave these texts as the base model had them: a rise of
their loss after training measures what the adapter broke outside its document. The
passages are general and factual (how rainbows form, a binary search in C), so any
base model has met their like, and no document teaches them.

Files: `passages/<id>.txt`, UTF-8, one passage each; the id is the file name without
`.txt`, prefixed by its language (`en-`, `fr-`, `de-`, `es-`, `py-`, `c-`, `js-`,
`rs-`, `go-`, `sql-`). Changing a passage changes every score measured on the set, so
passages are added or edited only with a new set version (`GENERAL_SET_VERSION`).

The general probes (`probes.json`, `load_general_probes`): questions any small
instruction model answers right (a capital, a short Python function, a unit
conversion, a definition, a word translated), each with the keys a right answer
contains (`dlm.judge.match`). The probe report asks them of the base model and of the
adapter (`dlm.judge.forgetting`): a probe the base answers and the adapter no longer
does was forgotten. The file is

    {"version": 1,
     "probes": [{"id": "capital-france", "question": "What is the capital of France?",
                 "keys": ["Paris"]}, ...]}

ids unique, lowercase words joined by `-`, sorted; every probe has at least one key.
Every remembered base-model reply is keyed by the file's sha256 (`GeneralProbeSet.sha256`),
so editing it recomputes them. `scripts/check-general-probes.py` asks the set of a base
model and says which probes it answers right: keep only those.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources

from dlm.errors import InstallError

GENERAL_SET_VERSION = 1
LANGUAGES = ("en", "fr", "de", "es", "py", "c", "js", "rs", "go", "sql")


def load_general_set() -> list[tuple[str, str]]:
    """Every passage of the general set as `(id, text)`, sorted by id.

    `text` is the file's content, UTF-8 decoded, with its final newline (the passages
    are scored as they are; nothing is stripped or normalized).

    Raises:
        InstallError: the package data is missing (a broken install).
    """
    folder = resources.files(__name__).joinpath("passages")
    entries = folder.iterdir() if folder.is_dir() else ()
    passages = [
        (entry.name.removesuffix(".txt"), entry.read_text(encoding="utf-8"))
        for entry in entries
        if entry.name.endswith(".txt")
    ]
    if not passages:
        raise InstallError(f"no passages in {folder}: reinstall dlm (its package data is missing)")
    return sorted(passages)


@dataclass(frozen=True)
class GeneralProbe:
    """One general question and the keys a right answer contains (`dlm.judge.match`)."""

    id: str
    question: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class GeneralProbeSet:
    """The general probes as shipped: `probes` in file order (sorted by id) and
    `sha256` (`sha256:<hex>` of the file's bytes), which names the set in memo keys."""

    probes: tuple[GeneralProbe, ...]
    sha256: str


def parse_general_probes(data: bytes, source: str = "probes.json") -> GeneralProbeSet:
    """The probe set held by `data` (the file's bytes; module docstring has the format).

    Raises:
        ValueError: `data` is not such a file; the message names `source`, the probe and
            what is wrong.
    """
    try:
        raw = json.loads(data.decode("utf-8"))
        entries = raw["probes"]
        probes = tuple(
            GeneralProbe(str(e["id"]), str(e["question"]), tuple(str(k) for k in e["keys"])) for e in entries
        )
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{source}: not a general probe file ({exc})") from exc
    ids = [p.id for p in probes]
    problems = [f"probe {p.id!r} has no keys" for p in probes if not any(k.strip() for k in p.keys)]
    problems += [f"id {i!r} is not lowercase words joined by '-'" for i in ids if not re.fullmatch(r"[a-z0-9-]+", i)]
    if ids != sorted(set(ids)):
        problems.append("ids are not unique and sorted")
    if not probes:
        problems.append("no probes")
    if problems:
        raise ValueError(f"{source}: {'; '.join(problems)}")
    return GeneralProbeSet(probes, f"sha256:{hashlib.sha256(data).hexdigest()}")


def load_general_probes() -> GeneralProbeSet:
    """The general probes shipped with dlm (`probes.json` beside this module).

    Raises:
        InstallError: the file is missing, or damaged (`parse_general_probes`'s message).
    """
    entry = resources.files(__name__).joinpath("probes.json")
    if not entry.is_file():
        raise InstallError(f"{entry}: missing; reinstall dlm (its package data is missing)")
    try:
        return parse_general_probes(entry.read_bytes(), str(entry))
    except ValueError as exc:  # the message names the file; a damaged install, not bad input
        raise InstallError(f"{exc}; reinstall dlm") from None

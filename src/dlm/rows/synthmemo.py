"""The facts of a run's source files for `training.synth`, and the memo that spares
parsing unchanged files again.

`source_facts` reads only the files the walk took that a reader takes
(`dlm.rows.facts.files.wanted_file`: Python, other code, prose, config), through `dlm.rows.read` (binary, unreadable and grown-too-large files give
no facts; a lossy file is parsed with its U+FFFD replacements). Reading and hashing
a file is cheap; `ast.parse` of it is not, so facts are remembered by content
(docs/benchmarks.md, "Synth facts: parsing against reading").

Memo file: `$DLM_HOME/synth-facts/<code>.json`, where `<code>` hashes the bytes of
`dlm.rows.synth` and of every `dlm.rows.facts` module, the running Python's
`major.minor` (the `ast` that parses and unparses) and the installed
`tree-sitter-language-pack` version (its grammars), so a change to any starts an
empty memo:

    {"entries": {"<xxh3_128 hex of relpath NUL text>": [[kind, path, line, name, what,
                 answer, subject], ...] | "<why it was not parsed>", ...}}

A file its reader cannot parse is remembered by its reason (`dlm.rows.facts.files.parsed_facts`),
so every run names it again in one line (`source_facts`' `notes`) without parsing it.

A key holds the relpath because facts name it. The file is rewritten through the
atomic-write helper when a run parsed something; past `MEMO_ENTRIES` files it keeps
those this run used. Two runs writing at once: the last write wins, and what the
other learned is parsed again next time (a cost, never a wrong fact: a key is the
whole input of `file_facts`). A damaged or unreadable memo reads as empty.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

import xxhash

from dlm.atomic import atomic_write_json
from dlm.paths import dlm_home
from dlm.rows import facts as facts_package
from dlm.rows import synth
from dlm.rows.facts.files import parsed_facts, wanted_file
from dlm.rows.facts.model import Fact
from dlm.rows.read import display_relpath, read_file_text
from dlm.rows.types import FileRow

MEMO_DIR = "synth-facts"
MEMO_ENTRIES = 200_000  # files remembered; past it, only this run's are kept
MEMO_FILES = 4  # memo files of other code versions kept beside the current one


class FactMemo:
    """File content key -> facts, in `path` (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: dict[str, list[Fact] | str] = {}
        self.used: set[str] = set()
        self.dirty = False
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))["entries"]
            self.entries = {k: v if isinstance(v, str) else [Fact(*f) for f in v] for k, v in raw.items()}
        except (OSError, ValueError, TypeError, KeyError, AttributeError):
            self.entries = {}

    @classmethod
    def default(cls) -> FactMemo:
        """The memo of this code version under `$DLM_HOME`."""
        code = hashlib.sha256(Path(synth.__file__).read_bytes())
        for module in sorted(Path(facts_package.__file__).parent.glob("*.py")):
            code.update(module.name.encode() + b"\0" + module.read_bytes())
        code.update(f"python{sys.version_info[0]}.{sys.version_info[1]}".encode())
        code.update(f"tree-sitter-language-pack {_grammars_version()}".encode())
        return cls(dlm_home() / MEMO_DIR / f"{code.hexdigest()[:32]}.json")

    def facts(self, relpath: str, text: str) -> list[Fact] | str:
        """`parsed_facts(relpath, text)`, remembered: the facts, or why the file was not parsed."""
        key = xxhash.xxh3_128_hexdigest(
            relpath.encode("utf-8", "surrogateescape") + b"\0" + text.encode("utf-8", "surrogatepass")
        )
        self.used.add(key)
        got = self.entries.get(key)
        if got is None:
            got = self.entries[key] = parsed_facts(relpath, text)
            self.dirty = True
        return got

    def save(self) -> None:
        """Write the memo if this run parsed a file; best effort (OSError only costs
        a parse next time). Removes memo files of older code versions past `MEMO_FILES`."""
        if not self.dirty:
            return
        entries = self.entries
        if len(entries) > MEMO_ENTRIES:
            entries = {k: v for k, v in entries.items() if k in self.used}
        data = {
            k: v if isinstance(v, str) else [[f.kind, f.path, f.line, f.name, f.what, f.answer, f.subject] for f in v]
            for k, v in entries.items()
        }
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.path, {"entries": data})
            self.dirty = False
            others = sorted(
                (p for p in self.path.parent.glob("*.json") if p != self.path),
                key=lambda p: p.stat().st_mtime_ns,
                reverse=True,
            )
            for stale in others[MEMO_FILES:]:
                stale.unlink(missing_ok=True)
        except OSError:
            pass


def _grammars_version() -> str:
    try:
        return metadata.version("tree-sitter-language-pack")
    except metadata.PackageNotFoundError:
        return "absent"


def source_facts(files: Sequence[FileRow], memo: FactMemo | None = None, notes: list[str] | None = None) -> list[Fact]:
    """Facts of every wanted file among `files` (module docstring), in file order.

    Args:
        files: the walk's taken files.
        memo: remembered facts (None: parse every file; nothing is written).
        notes: where to add one line per file that could not be parsed (it gives no facts).
    """
    facts: list[Fact] = []
    for row in files:
        relpath, _ = display_relpath(row.relpath)
        if not wanted_file(relpath):
            continue
        got = read_file_text(row, row.max_bytes)
        if isinstance(got, str):  # a skip reason: binary, unreadable, too-large
            continue
        parsed = memo.facts(relpath, got.text) if memo is not None else parsed_facts(relpath, got.text)
        if isinstance(parsed, str):
            if notes is not None:
                notes.append(f"{relpath}: not parsed ({parsed}); training.synth draws no facts from it")
            continue
        facts += parsed
    if memo is not None:
        memo.save()
    return facts

"""Which reader takes a source file, decided from its path alone, and the dispatch.

    python      .py                                  `dlm.rows.synth` (`ast`)
    go, rust    .go, .rs                             `dlm.rows.facts.code_ts`
    javascript  .js .mjs .cjs .jsx                   `dlm.rows.facts.code_ts`
    typescript  .ts .tsx                             `dlm.rows.facts.code_ts`
    java        .java                                `dlm.rows.facts.code_ts`
    c           .c .h                                `dlm.rows.facts.code_c`
    cpp         .cc .cpp .cxx .hh .hpp .hxx          `dlm.rows.facts.code_c`
    markdown    .md .markdown, README without suffix `dlm.rows.facts.prose`
    text        .txt .rst                            `dlm.rows.facts.prose`
    yaml, toml, json, ini (.yaml .yml .toml .json .ini .cfg)  `dlm.rows.facts.config`

Skipped by their path, beside Python's own rules (`dlm.rows.synth.wanted_file`): a
file under a `test`/`tests`/`testing`/`testdata`/`vendor`/`node_modules` folder or a
folder starting with `.`; test files (`*_test.go`, `*.test.ts`, `*.spec.js`, ...);
declaration and minified files (`*.d.ts`, `*.min.js`); lock files and lists that are
not prose (`package-lock.json`, `requirements*.txt`, `CMakeLists.txt`) and licences
(`LICENSE*`, `COPYING*`, `NOTICE*`).
"""

from __future__ import annotations

from collections.abc import Iterable

from dlm.rows.facts.model import Fact

_KINDS = {
    ".py": "python",
    ".go": "go",
    ".rs": "rust",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".tsx": "typescript",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hh": "cpp",
    ".hpp": "cpp",
    ".hxx": "cpp",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".rst": "text",
    ".yaml": "yaml",
    ".yml": "yaml",
    ".toml": "toml",
    ".json": "json",
    ".ini": "ini",
    ".cfg": "ini",
}
# why a prose file gives no statements (`dlm.rows.facts.language`)
NOT_ENGLISH = "its prose is not English, and the statement rules read English"
CODE_KINDS = frozenset({"python", "go", "rust", "javascript", "typescript", "java", "c", "cpp"})
PROSE_KINDS = frozenset({"markdown", "text"})
CONFIG_KINDS = frozenset({"yaml", "toml", "json", "ini"})

_SKIP_DIRS = frozenset({"test", "tests", "testing", "testdata", "idle_test", "vendor", "node_modules"})
_SKIP_SUFFIXES = ("_test.go", ".d.ts", ".min.js", "-lock.json", ".lock.json")
_SKIP_INFIXES = (".test.", ".spec.")
_SKIP_PREFIXES = ("license", "copying", "notice", "requirements", "constraints", "cmakelists")


def source_kind(relpath: str) -> str | None:
    """The reader kind of `relpath` by its suffix (module table), or None when no
    reader takes it. A `.dlm` document's own facts have no kind here."""
    base = relpath.rsplit("/", 1)[-1]
    dot = base.rfind(".")
    if dot <= 0:
        return "markdown" if base.upper() == "README" else None
    return _KINDS.get(base[dot:].lower())


def wanted_file(relpath: str) -> bool:
    """Whether a reader takes `relpath` (module rules); decided from the path alone."""
    kind = source_kind(relpath)
    if kind is None:
        return False
    if kind == "python":
        from dlm.rows.synth import wanted_file as python_wanted

        return python_wanted(relpath)
    *dirs, base = relpath.split("/")
    lower = base.lower()
    if any(d in _SKIP_DIRS or d.startswith(".") for d in dirs) or lower.startswith((".", "_")):
        return False
    if lower.endswith(_SKIP_SUFFIXES) or any(i in lower for i in _SKIP_INFIXES):
        return False
    return not lower.startswith(_SKIP_PREFIXES)


def parsed_facts(relpath: str, text: str) -> list[Fact] | str:
    """The facts of one source file in source order, or why its reader could not
    parse it (one short phrase: "syntax error at line 3"; prose that is not English,
    `NOT_ENGLISH`); [] for a file no reader takes (`wanted_file`). A pure function of
    `(relpath, text)`."""
    if not wanted_file(relpath):
        return []
    kind = source_kind(relpath)
    if kind == "python":
        from dlm.rows.synth import parsed_facts as python_facts

        return python_facts(relpath, text)
    if kind in PROSE_KINDS:
        from dlm.rows.facts.language import reads_english
        from dlm.rows.facts.prose import prose_facts

        return NOT_ENGLISH if reads_english(text) is False else prose_facts(relpath, text)
    if kind in CONFIG_KINDS:
        from dlm.rows.facts.config import config_facts

        return config_facts(relpath, text, kind)
    if kind in ("c", "cpp"):
        from dlm.rows.facts.code_c import c_facts

        return c_facts(relpath, text, kind)
    from dlm.rows.facts.code_ts import code_facts

    return code_facts(relpath, text, kind or "")


def by_source(pairs: Iterable[Fact], probes: Iterable[Fact]) -> dict[str, dict[str, int]]:
    """Training pairs and probes per source kind, sorted by kind: `source_kind` of each
    fact's path (`python`, `go`, `markdown`, `yaml`, ...), `document` for the document's
    own facts. `pairs`: the fact of each training pair (a fact repeats per phrasing)."""
    counts: dict[str, dict[str, int]] = {}
    for side, facts in (("pairs", pairs), ("probes", probes)):
        for fact in facts:
            kind = source_kind(fact.path) or "document"
            counts.setdefault(kind, {"pairs": 0, "probes": 0})[side] += 1
    return dict(sorted(counts.items()))

"""Questions drawn from the sources: Q/A pairs about what a document and its source
tree state, made offline and deterministically, without a teacher model
(`training.synth`). This module reads Python and turns every fact into pairs and
probes; `dlm.rows.facts` reads prose, config files and other languages.

An adapter trained on a file's text learns to continue that text; asked "where is
`JSONDecoder` defined?" it has seen no question of that shape. These pairs state the
facts the code already holds, one fact per pair, in a few phrasings, so the adapter
learns the fact rather than one string.

Facts of Python files, read with the standard library's `ast` (the other readers'
rules are in their modules; the kinds are `dlm.rows.facts.model`'s):

    where      a top-level public class, function or constant -> its file
               ("Where is `JSONDecoder` defined?" -> "In `json/decoder.py`.")
    purpose    a public class, function or method with a docstring -> the docstring's
               first sentence; an UPPER_CASE constant with `#` comment lines right
               above it (`#:` too) -> the comment's first sentence
    signature  a public function or method -> its parameters and return annotation; a
               class -> its `__init__` parameters (what a call takes)
    value      a top-level UPPER_CASE constant bound to a short literal -> the literal

Rules:
- skipped files: not `.py`; under a `test`/`tests`/`testing`/`idle_test` folder, or
  named `test_*.py`, `*_test.py`, `conftest.py`; any path segment starting with `_`
  (private modules and packages) except a package's `__init__.py`; a file `ast` cannot
  parse (a syntax error, a NUL byte, an expression nested too deeply for the parser):
  `parsed_facts` says why, and the run prints one line naming the file;
- skipped names: a leading underscore (private), dunder methods (`__init__` only
  gives a class its signature), `@overload` stubs, nested classes and functions;
  a property, and a function with no named parameter and no return annotation
  (`close()`, `wrapper(*args, **kwargs)`), has no signature fact;
- a docstring's first sentence ends at `.`, `!` or `?` followed by a space and a
  capital or the paragraph's end (never at `e.g.`/`i.e.`), and one ending in `:`
  (it announces a list) or starting with a call (`renames(old, new)`, an old-style
  signature line) gives no fact; reST roles and double
  backticks become single backticks; a sentence over `MAX_SENTENCE` characters, a
  signature over `MAX_SIGNATURE`, a literal over `MAX_LITERAL` gives no fact;
- a constant bound more than once at the top level of a file is what its last binding
  says (`TIMEOUT = 10`, later `TIMEOUT = 30`: 30); a last binding that is not a short
  literal (`TIMEOUT += 5`, `TIMEOUT = compute()`) gives no value fact;
- a probe's keys are strong: at least 2 characters and not a common English word
  (`SEP = 'a'`, `DEBUG = 0`, `FLAG = True` give no value probe: nearly every reply
  would contain the key);
- a `where` fact whose name is defined at the top level of more than one file is
  dropped (its answer would be ambiguous);
- questions other than `where` name the file (`JSONDecoder.decode` in
  `json/decoder.py`), never an import path guessed from the folder layout;
- each fact has `len(PHRASINGS[kind])` phrasings; `phrasings` of them train; a pair
  another fact already gave (a README and the document stating one sentence alike)
  trains once; statements whose trimmed questions (`dlm.rows.facts.asking.asked`)
  would coincide with different answers are asked in full;
- sampling and the probe split (for the facts of every reader) hash what a fact is
  about, never its phrasing:
  `max_facts` keeps the document's own facts (its prose and answers: what its
  author wrote to teach) before any source's, then the facts with the smallest
  `sha256(kind, path, name)`, and a
  definition (a top-level name in a file, with its methods) whose `sha256(path,
  name)` falls below `probe_share` gives probes instead of training pairs (`name`:
  the fact's `subject`, a top-level name for code, a sentence's subject for prose, a
  key's parent for config). All facts
  about one definition fall on the same side, so no training pair names a probe's
  answer. Output order is sorted, independent of input order and `PYTHONHASHSEED`;
  the same files give the same pairs on every machine with the same Python minor
  version (`ast.unparse` writes signatures and literals, and may change between
  versions).

`file_facts` (and `parsed_facts`) is a pure function of `(relpath, text)`; `synthesize` a
pure function of those facts and the settings.
"""

from __future__ import annotations

import ast
import heapq
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from dlm.rows.facts.asking import asked
from dlm.rows.facts.model import FACT_KINDS, WEAK_KEYS, Fact, FactKind, Pair, strong_key, unit_hash
from dlm.rows.facts.phrasing import MAX_PHRASINGS, PHRASINGS, phrase, probe_keys

__all__ = [
    "FACT_KINDS",
    "MAX_PHRASINGS",
    "PHRASINGS",
    "WEAK_KEYS",
    "Fact",
    "FactKind",
    "Pair",
    "SynthSet",
    "file_facts",
    "first_sentence",
    "parsed_facts",
    "phrase",
    "probe_keys",
    "strong_key",
    "synthesize",
    "unit_hash",
    "wanted_file",
]

MAX_SENTENCE = 240  # characters of a docstring's first sentence
MAX_SIGNATURE = 160  # characters of a rendered signature
MAX_LITERAL = 40  # characters of a constant's literal

_TEST_DIRS = frozenset({"test", "tests", "testing", "idle_test"})
_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`]+)`")  # :func:`x`, :py:class:`~a.b`
_SENTENCE_END = re.compile(r"[.!?](?=\s+[A-Z`\"'(]|$)")
_CALL = re.compile(r"[\w.]+\(")  # "renames(old, new)": a signature line, not a sentence
_ABBREV = ("e.g", "i.e", "etc", "vs", "cf")


@dataclass(frozen=True)
class SynthSet:
    """What `synthesize` gives: `train` as (fact, pair) in order, `probes` as
    (fact, pair, keys) with keys the strings a correct answer must contain."""

    train: list[tuple[Fact, Pair]]
    probes: list[tuple[Fact, Pair, tuple[str, ...]]]
    facts: int  # facts kept after dropping ambiguous ones and the `max_facts` cap
    notes: tuple[str, ...] = ()  # one line per source file that could not be parsed


def wanted_file(relpath: str) -> bool:
    """Whether `relpath` is a file `file_facts` reads (module rules: Python, not a
    test, not private). Decided from the path alone, so the caller reads no other file."""
    if not relpath.endswith(".py"):
        return False
    *dirs, base = relpath.split("/")
    if any(d in _TEST_DIRS or d.startswith("_") for d in dirs):
        return False
    if base.startswith("test_") or base.endswith("_test.py") or base == "conftest.py":
        return False
    return base == "__init__.py" or not base.startswith("_")


def file_facts(relpath: str, text: str) -> list[Fact]:
    """The facts of one source file, in source order ([] for a file the rules skip).

    Args:
        relpath: the path relative to the sources root, POSIX, as the file row names it.
        text: the file's content.
    """
    got = parsed_facts(relpath, text)
    return [] if isinstance(got, str) else got


def parsed_facts(relpath: str, text: str) -> list[Fact] | str:
    """`file_facts`, or why `ast` could not parse the file: "syntax error at line N",
    "a NUL byte", "nested too deeply to parse" (the parser's recursion limit: a very long
    expression). A file the rules skip by its path gives []."""
    if not wanted_file(relpath):
        return []
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        return f"syntax error at line {exc.lineno}"
    except ValueError:
        return "a NUL byte"
    except (RecursionError, MemoryError):
        return "nested too deeply to parse"
    try:
        return _module_facts(relpath, tree, text.splitlines())
    except RecursionError:  # unparse of a deep literal or signature
        return "nested too deeply to parse"


def comment_above(lines: Sequence[str], line: int, markers: tuple[str, ...]) -> str | None:
    """The first sentence of the comment lines (starting with one of `markers`) right
    above 1-based `line`, none blank between; None without one. A Sphinx attribute
    comment's `#:` is a comment marker too."""
    block: list[str] = []
    for raw in reversed(lines[: max(line - 1, 0)]):
        stripped = raw.strip()
        if not stripped.startswith(markers):
            break
        block.insert(0, stripped.lstrip("".join(markers)).removeprefix(":").strip())
    return first_sentence(" ".join(block)) if any(block) else None


def _module_facts(relpath: str, tree: ast.Module, lines: Sequence[str] = ()) -> list[Fact]:
    facts: list[Fact] = []
    seen: set[str] = set()
    constants: dict[str, list[Fact]] = {}  # the last binding of each constant wins
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if _public(node.name) and node.name not in seen and not _is_overload(node):
                seen.add(node.name)
                facts += _definition_facts(relpath, node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            target = (
                node.targets[0]
                if isinstance(node, ast.Assign) and len(node.targets) == 1
                else getattr(node, "target", None)
            )
            if isinstance(target, ast.Name) and _CONSTANT.fullmatch(target.id) and target.id not in seen:
                value = None if isinstance(node, ast.AugAssign) else node.value
                constants.pop(target.id, None)  # re-inserted: source order of the last binding
                constants[target.id] = _constant_facts(relpath, node.lineno, target.id, value)
                comment = comment_above(lines, node.lineno, ("#",))
                if comment:  # what the constant means (`synthesize` asks its value by it)
                    constants[target.id].append(
                        Fact("purpose", relpath, node.lineno, target.id, "constant", comment, target.id)
                    )
    return facts + [f for bound in constants.values() for f in bound]


def _public(name: str) -> bool:
    return not name.startswith("_")


def _is_overload(node: ast.AST) -> bool:
    return any(_decorator_name(d) == "overload" for d in getattr(node, "decorator_list", ()))


def _decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _definition_facts(path: str, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> list[Fact]:
    what = "class" if isinstance(node, ast.ClassDef) else "function"
    name = node.name
    facts = [Fact("where", path, node.lineno, name, what, path, name)]
    facts += _purpose(path, node, name, what, name)
    if isinstance(node, ast.ClassDef):
        init = next(
            (n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == "__init__"),
            None,
        )
        if init is not None:
            facts += _signature(path, node.lineno, name, "class", init, name, drop_first=True)
        seen: set[str] = set()
        for item in node.body:
            if (
                isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                and _public(item.name)
                and item.name not in seen
                and not _is_overload(item)
            ):
                seen.add(item.name)
                qual = f"{name}.{item.name}"
                facts += _purpose(path, item, qual, "method", name)
                decorators = {_decorator_name(d) for d in item.decorator_list}
                if not decorators & {"property", "setter", "getter", "deleter", "cached_property"}:
                    drop = "staticmethod" not in decorators
                    facts += _signature(path, item.lineno, qual, "method", item, name, drop_first=drop)
    else:
        facts += _signature(path, node.lineno, name, what, node, name, drop_first=False)
    return facts


def _purpose(path: str, node: ast.AST, name: str, what: str, subject: str) -> list[Fact]:
    doc = ast.get_docstring(node)  # type: ignore[arg-type]
    sentence = first_sentence(doc) if doc else None
    if sentence is None:
        return []
    return [Fact("purpose", path, node.lineno, name, what, sentence, subject)]  # type: ignore[attr-defined]


def first_sentence(doc: str) -> str | None:
    """The first sentence of a docstring's first paragraph, whitespace collapsed and
    reST markup reduced to single backticks; None when empty or over `MAX_SENTENCE`."""
    para = " ".join(doc.strip().split("\n\n", 1)[0].split())
    para = _ROLE.sub(r"`\1`", para).replace("``", "`")
    end = len(para)
    for match in _SENTENCE_END.finditer(para):
        if not para[: match.start()].lower().endswith(_ABBREV):
            end = match.end()
            break
    sentence = para[:end].strip()
    if len(sentence) < 8 or len(sentence) > MAX_SENTENCE or sentence.endswith(":") or _CALL.match(sentence):
        return None
    return sentence if sentence[-1] in ".!?" else sentence + "."


def _signature(
    path: str,
    line: int,
    name: str,
    what: str,
    func: ast.FunctionDef | ast.AsyncFunctionDef,
    subject: str,
    *,
    drop_first: bool,
) -> list[Fact]:
    args = func.args
    if drop_first:
        positional = args.posonlyargs + args.args
        if not positional:
            return []  # a method without self: nothing sensible to show
        defaults = args.defaults[1:] if len(args.defaults) == len(positional) else args.defaults
        args = ast.arguments(
            posonlyargs=args.posonlyargs[1:],
            args=args.args if args.posonlyargs else args.args[1:],
            vararg=args.vararg,
            kwonlyargs=args.kwonlyargs,
            kw_defaults=args.kw_defaults,
            kwarg=args.kwarg,
            defaults=defaults,
        )
    params = ast.unparse(args)
    returns = ast.unparse(func.returns) if func.returns is not None and what != "class" else ""
    named = args.posonlyargs + args.args + args.kwonlyargs
    if not named and not returns:
        return []  # `close()`, `wrapper(*args, **kwargs)`: nothing to learn
    leaf = name.rsplit(".", 1)[-1] if what != "class" else name
    text = f"{leaf}({params})" + (f" -> {returns}" if returns else "")
    if len(text) > MAX_SIGNATURE:
        return []
    return [Fact("signature", path, line, name, what, text, subject)]


def _constant_facts(path: str, line: int, name: str, value: ast.expr | None) -> list[Fact]:
    facts = [Fact("where", path, line, name, "constant", path, name)]
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub) and isinstance(value.operand, ast.Constant):
        literal = ast.unparse(value)
    elif isinstance(value, ast.Constant) and value.value is not Ellipsis:
        literal = ast.unparse(value)
    else:
        return facts
    if len(literal) <= MAX_LITERAL and "\n" not in literal:
        facts.append(Fact("value", path, line, name, "constant", literal, name))
    return facts


def _order(fact: Fact) -> tuple[str, int, str, int, str]:
    return fact.path, fact.line, fact.name, FACT_KINDS.index(fact.kind), fact.answer


def synthesize(
    facts: Iterable[Fact],
    *,
    kinds: Sequence[str] = FACT_KINDS,
    phrasings: int = 3,
    probe_share: float = 0.25,
    max_facts: int | None = None,
    preferred: Iterable[Fact] = (),
) -> SynthSet:
    """Training pairs and probes from the facts of every file (module rules).

    Args:
        facts: `file_facts` of each file, in any order.
        kinds: fact kinds to keep.
        phrasings: training pairs per fact, 1..`MAX_PHRASINGS`.
        probe_share: share of definitions held out as probes, in [0, 1).
        max_facts: keep at most this many facts, chosen by hash (None: all).
        preferred: facts kept under `max_facts` before any other (the document's own).
    """
    facts = list(facts)
    # what a value or setting means: the doc or config comment right above it
    glosses = {(f.path, f.name): f.answer for f in facts if f.kind == "purpose"}
    where_files: dict[str, set[str]] = defaultdict(set)
    for fact in facts:
        if fact.kind == "where":
            where_files[fact.name].add(fact.path)
    unique: dict[tuple[str, str, str], Fact] = {}
    for fact in facts:
        if fact.kind in kinds and not (fact.kind == "where" and len(where_files[fact.name]) > 1):
            key = (fact.kind, fact.path, fact.name)
            seen = unique.get(key)
            if seen is None or _order(fact) < _order(seen):  # the first in source order, whatever the input order
                unique[key] = fact
    keys: Iterable[tuple[str, str, str]] = unique
    if max_facts is not None and len(unique) > max_facts:
        first = {(f.kind, f.path, f.name) for f in preferred}
        keys = heapq.nsmallest(max_facts, unique, key=lambda k: (k not in first, unit_hash("sample", *k)))
    kept = sorted((unique[k] for k in keys), key=_order)
    ambiguous = _ambiguous_trims(kept)
    train: list[tuple[Fact, Pair]] = []
    probes: list[tuple[Fact, Pair, tuple[str, ...]]] = []
    trained: set[Pair] = set()
    for fact in kept:
        if unit_hash("probe", fact.path, fact.subject) < probe_share:
            wanted = probe_keys(fact)
            if wanted or fact.kind in ("purpose", "signature"):  # a value or path no reply can be told by
                probes.append((fact, phrase(fact, 1)[0], wanted))
            continue
        for pair in phrase(fact, phrasings, glosses.get((fact.path, fact.name)), trim=fact not in ambiguous):
            if pair not in trained:  # a README and the document stating one sentence alike
                trained.add(pair)
                train.append((fact, pair))
    return SynthSet(train=train, probes=probes, facts=len(kept))


def _ambiguous_trims(facts: Sequence[Fact]) -> set[Fact]:
    """The statements whose trimmed question (`dlm.rows.facts.asking.asked`) another
    statement with another answer shares: they keep their whole question, so that no
    question is trained toward two answers."""
    questions = {fact: asked(fact) for fact in facts if fact.kind == "statement"}
    answers: dict[str, set[str]] = defaultdict(set)
    for fact, question in questions.items():
        answers[question].add(fact.name)
    return {fact for fact, question in questions.items() if len(answers[question]) > 1}

"""Frontmatter: split the `---` block off a `.dlm` text, read its YAML, validate it.

Layout of a `.dlm` text (lines counted from 1):

    line 1        ---                  the opening delimiter (trailing spaces allowed)
    lines 2..k-1  YAML frontmatter     read with `yaml.safe_load`, never `yaml.load`
    line k        ---                  the first later line that is exactly `---`
    lines k+1..   markdown body        see `dlm.doc.body`

Problems carry file positions: YAML errors come from the YAML problem mark; schema
errors are placed by composing the YAML node tree with `yaml.SafeLoader` (key path ->
mark of the key and of its value) and looking up each pydantic error's `loc`.
An error about a key (unknown, missing, duplicate) points at the key; one about a
value points at the value.
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from dlm.doc.problems import DocProblem, short_repr
from dlm.doc.schema import SUPPORTED_DLM_VERSION, Frontmatter, version_message

DELIMITER = "---"
YAML_FIRST_LINE = 2  # the YAML text starts on the line after the opening `---`

Loc = tuple[Hashable, ...]


@dataclass(frozen=True)
class SplitText:
    """A `.dlm` text cut in two. Lines are 1-based file line numbers."""

    yaml_text: str
    body_lines: list[str]
    body_first_line: int


def split_text(text: str) -> SplitText | DocProblem:
    """Cut normalized text (`\\n` newlines, no BOM) at its delimiters, or say why not."""
    lines = text.split("\n")
    if lines[0].rstrip() != DELIMITER:
        return DocProblem(
            1,
            1,
            "a .dlm file must start with a '---' line, then YAML frontmatter, then a "
            "'---' line, then the markdown body; `dlm init` writes one",
        )
    for i in range(1, len(lines)):
        if lines[i].rstrip() == DELIMITER:
            return SplitText("\n".join(lines[1:i]) + "\n", lines[i + 1 :], i + 2)
    return DocProblem(1, 1, "the frontmatter opened here is never closed; add a '---' line after it")


@dataclass(frozen=True)
class _Marks:
    key: tuple[int, int]
    value: tuple[int, int]
    value_is_scalar: bool


def _pos(mark: yaml.Mark) -> tuple[int, int]:
    return mark.line + YAML_FIRST_LINE, mark.column + 1


def _index(node: yaml.Node, loc: Loc, marks: dict[Loc, _Marks], problems: list[DocProblem]) -> None:
    """Record the marks of every key path under `node`; flag duplicate keys."""
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            pos = _pos(key_node.start_mark)
            if key in seen:
                problems.append(DocProblem(*pos, f"duplicate key '{key}' (first at line {seen[key]}); keep one"))
                continue
            seen[key] = pos[0]
            child = (*loc, key)
            scalar = isinstance(value_node, yaml.ScalarNode)
            marks[child] = _Marks(pos, _pos(value_node.start_mark), scalar)
            _index(value_node, child, marks, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            child = (*loc, i)
            pos = _pos(item.start_mark)
            marks[child] = _Marks(pos, pos, isinstance(item, yaml.ScalarNode))
            _index(item, child, marks, problems)


def _yaml_problem(exc: yaml.YAMLError, yaml_text: str) -> DocProblem:
    if isinstance(exc, yaml.reader.ReaderError):
        before = yaml_text[: exc.position]
        line, col = before.count("\n") + YAML_FIRST_LINE, exc.position - before.rfind("\n")
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return DocProblem(line, col, f"invalid YAML: character U+{char:04X} is not allowed; remove it")
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        line, col = _pos(exc.problem_mark)
        what = exc.problem or "malformed YAML"
        if exc.context and exc.context_mark is not None:
            what = f"{what} ({exc.context} at line {_pos(exc.context_mark)[0]})"
        return DocProblem(line, col, f"invalid YAML: {what}")
    return DocProblem(YAML_FIRST_LINE, 1, f"invalid YAML: {exc}")


def value_position(yaml_text: str, loc: Loc) -> tuple[int, int] | None:
    """(line, column) in the file of the value at key path `loc` (e.g.
    `("training", "sources", 0, "path")`), or None when the YAML does not write it."""
    try:
        root = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return None
    marks: dict[Loc, _Marks] = {}
    if root is not None:
        _index(root, (), marks, [])
    found = marks.get(loc)
    return found.value if found is not None else None


def read_frontmatter(yaml_text: str) -> Frontmatter | list[DocProblem]:
    """Parse and validate the frontmatter YAML; returns the model or every problem."""
    try:
        data = yaml.safe_load(yaml_text)
        root = yaml.compose(yaml_text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        return [_yaml_problem(exc, yaml_text)]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return [DocProblem(YAML_FIRST_LINE, 1, "the frontmatter must be a YAML mapping of `key: value` lines")]
    marks: dict[Loc, _Marks] = {}
    problems: list[DocProblem] = []
    if root is not None:
        _index(root, (), marks, problems)
    version = data.get("dlm_version", SUPPORTED_DLM_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version != SUPPORTED_DLM_VERSION:
        # Another version's schema cannot be checked with this one: say only this.
        return [
            DocProblem(
                *_where(("dlm_version",), marks, key=False),
                f"dlm_version: {version_message(version)}",
            )
        ]
    try:
        fm = Frontmatter.model_validate(data)
    except ValidationError as exc:
        return problems + [_schema_problem(err, marks) for err in exc.errors()]
    return problems or fm


def dotted(loc: Loc) -> str:
    """`('training', 'sources', 0, 'path')` -> `training.sources[0].path`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _model_at(loc: Loc) -> type[BaseModel] | None:
    """The schema model that holds the keys at `loc` (list indices step into items)."""
    cls: type[BaseModel] | None = Frontmatter
    for part in loc:
        if isinstance(part, int):
            continue
        field = cls.model_fields.get(str(part)) if cls else None
        cls = _model_in(field.annotation) if field else None
    return cls


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _where(loc: Loc, marks: dict[Loc, _Marks], *, key: bool) -> tuple[int, int]:
    """Position of `loc`, or of its nearest recorded ancestor; line 1 for the root."""
    while loc and loc not in marks:
        loc = loc[:-1]
    if not loc:
        return 1, 1
    m = marks[loc]
    return m.value if (m.value_is_scalar and not key) else m.key


_TYPE_WORDS = {
    "int_type": "should be an integer",
    "int_parsing": "should be an integer",
    "int_from_float": "should be a whole number",
    "float_type": "should be a number",
    "float_parsing": "should be a number",
    "bool_type": "should be true or false",
    "bool_parsing": "should be true or false",
    "string_type": "should be a string",
    "list_type": "should be a list",
    "model_type": "should be a mapping of keys",
    "dict_type": "should be a mapping of keys",
    "model_attributes_type": "should be a mapping of keys",
}


def _yaml_word(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return short_repr(value)


def _schema_problem(err: Any, marks: dict[Loc, _Marks]) -> DocProblem:
    loc: Loc = tuple(err["loc"])
    kind = err["type"]
    if kind == "extra_forbidden":
        return DocProblem(*_where(loc, marks, key=True), _unknown_key(loc))
    if kind == "invalid_key":
        where = _where((*loc[:-1], str(loc[-1])), marks, key=True)
        return DocProblem(*where, f"key {loc[-1]!r} is not a string; quote it or remove it")
    if kind == "missing":
        return DocProblem(*_where(loc[:-1], marks, key=True), _missing_key(loc))
    name = dotted(loc) or "frontmatter"
    if kind == "value_error":
        text = str(err["msg"]).removeprefix("Value error, ")
        return DocProblem(*_where(loc, marks, key=False), f"{name}: {text}")
    if kind in ("too_short", "string_too_short") and err.get("ctx", {}).get("min_length") == 1:
        return DocProblem(*_where(loc, marks, key=True), f"{name}: should not be empty")
    text = _TYPE_WORDS.get(kind) or _lower_first(str(err["msg"]))
    text = f"{text} (got {_yaml_word(err.get('input'))})"
    if kind in ("model_type", "dict_type") and err.get("input") is None:
        text += "; remove the key to use the defaults"
    return DocProblem(*_where(loc, marks, key=False), f"{name}: {text}")


def _lower_first(msg: str) -> str:
    for prefix in ("Input ", "String ", "List "):
        if msg.startswith(prefix):
            return msg[len(prefix) :]
    return msg[:1].lower() + msg[1:]


def _unknown_key(loc: Loc) -> str:
    key, parent = loc[-1], loc[:-1]
    where = f" in {dotted(parent)}" if parent else ""
    msg = f"unknown key '{key}'{where}"
    model = _model_at(parent)
    if model is not None and isinstance(key, str):
        close = difflib.get_close_matches(key, list(model.model_fields), n=1, cutoff=0.6)
        if close:
            return f"{msg}; did you mean '{close[0]}'?"
        return f"{msg}; known keys: {', '.join(model.model_fields)}"
    return msg


def _missing_key(loc: Loc) -> str:
    key, parent = loc[-1], loc[:-1]
    where = f" in {dotted(parent)}" if parent else ""
    msg = f"missing required key '{key}'{where}"
    if loc == ("dlm_id",):
        from ulid import ULID

        msg += f"; add e.g. `dlm_id: {ULID()}` (a fresh ULID)"
    return msg

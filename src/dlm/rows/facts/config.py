"""Settings of config files: each scalar key's dotted path and its value.

    YAML  `yaml.safe_load` (one document; a stream of several is not parsed)
    TOML  `tomllib` (Python 3.11 or later; on 3.10 a TOML file is named as not parsed)
    JSON  `json`
    INI   `configparser`, no interpolation: `section.key`; a `[DEFAULT]` key is
          `DEFAULT.key`, and a section's key is kept only where it differs from it

Rules:
- a mapping's keys join with `.` (`server.port`); a list of scalars is one setting,
  its items joined by `, ` in order (`dryers`: `D1, D2, D3`), where that fits in
  `MAX_VALUE`; any other list's items are indexed (`servers[0].host`); a key holding
  `.`, a space or a bracket is quoted (`"a.b"`);
- values: strings as they are, numbers as written by Python, booleans `true`/`false`,
  null `null`; a value over `MAX_VALUE` characters or holding a newline, an empty
  mapping or list, gives no fact; at most `MAX_SETTINGS` per file, in document order;
- a fact's line is the first line, at or after its parent key's, that names the
  key's last part (the parsers give no lines); 1 when none does;
- a fact's subject (the probe split's unit) is the key's parent path, or the key
  itself at the top level, so `server.port` and `server.host` fall on the same side;
- a key with comment lines right above its line (`#`, or `;` in INI; JSON has none)
  also gives a `purpose` fact, the comment's first sentence: what the key means, which
  `dlm.rows.synth.synthesize` asks its setting by;
- a package manifest's dependency lists (`MANIFEST_LISTS`: `package.json`'s
  `dependencies`, `pyproject.toml`'s `build-system` and `project.dependencies`,
  `Cargo.toml`'s `[dependencies]` ...) give no facts: version pins a tool keeps, like
  a `requirements.txt`;
- a file that does not parse gives why ("YAML error at line 3"); a top-level
  scalar gives no facts.
"""

from __future__ import annotations

import configparser
import json
import re
from collections.abc import Iterator

import yaml

from dlm.rows.facts.model import Fact
from dlm.rows.synth import comment_above

MAX_VALUE = 80  # characters of a rendered value
MAX_SETTINGS = 200  # settings per file
# a package manifest's dependency lists, by file name: key paths whose settings are pins
# a tool maintains, not what the project says about itself (as `requirements.txt`,
# which `dlm.rows.facts.files` skips whole)
MANIFEST_LISTS: dict[str, tuple[tuple[str, ...], ...]] = {
    "package.json": tuple(
        (k,)
        for k in "dependencies devDependencies peerDependencies optionalDependencies bundleDependencies "
        "bundledDependencies overrides resolutions".split()
    ),
    "pyproject.toml": (
        ("build-system",),
        ("project", "dependencies"),
        ("project", "optional-dependencies"),
        ("dependency-groups",),
        ("tool", "poetry", "dependencies"),
        ("tool", "poetry", "group"),
    ),
    "Cargo.toml": (("dependencies",), ("dev-dependencies",), ("build-dependencies",), ("workspace", "dependencies")),
    "composer.json": (("require",), ("require-dev",)),
}
_FORMATS = {"yaml": "YAML", "toml": "TOML", "json": "JSON", "ini": "INI"}
_PLAIN_KEY = re.compile(r"[^.\s\[\]\"]+")


def config_facts(relpath: str, text: str, kind: str) -> list[Fact] | str:
    """The `setting` facts of one config file in document order, each followed by the
    `purpose` fact of its comment where it has one (module rules), or why it could not
    be parsed. `kind`: "yaml", "toml", "json" or "ini" (`dlm.rows.facts.files`)."""
    loaded = _load(text, kind)
    if isinstance(loaded, str):
        return loaded
    lines = text.splitlines()
    facts: list[Fact] = []
    settings = 0
    skipped = MANIFEST_LISTS.get(relpath.rsplit("/", 1)[-1], ())
    for parts, value in _leaves(loaded, ()):
        rendered = _render(value)
        if rendered is None or _under(parts, skipped):
            continue
        name = _dotted(parts)
        subject = _dotted(parts[:-1]) or name
        line = _line_of(lines, parts)
        facts.append(Fact("setting", relpath, line, name, _FORMATS[kind], rendered, subject))
        settings += 1
        comment = comment_above(lines, line, ("#", ";"))
        if comment:
            facts.append(Fact("purpose", relpath, line, name, _FORMATS[kind], comment, subject))
        if settings == MAX_SETTINGS:
            break
    return facts


def _load(text: str, kind: str) -> object | str:
    if kind == "yaml":
        try:
            return yaml.safe_load(text)
        except yaml.MarkedYAMLError as exc:
            line = exc.problem_mark.line + 1 if exc.problem_mark is not None else 1
            return f"YAML error at line {line}"
        except yaml.YAMLError:
            return "YAML error"
        except RecursionError:
            return "nested too deeply to parse"
    if kind == "toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10: no TOML reader in the standard library
            return "TOML needs Python 3.11 or later"
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            match = re.search(r"line (\d+)", str(exc))
            return f"TOML error at line {match.group(1)}" if match else "TOML error"
    if kind == "json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            return f"JSON error at line {exc.lineno}"
        except RecursionError:
            return "nested too deeply to parse"
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        line = getattr(exc, "lineno", None)
        return f"INI error at line {line}" if line else "INI error"
    defaults = dict(parser.defaults())
    data: dict[str, object] = {"DEFAULT": defaults} if defaults else {}
    for section in parser.sections():
        own = {k: v for k, v in parser.items(section, raw=True) if defaults.get(k) != v}
        data[section] = own
    return data


def _leaves(value: object, parts: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], object]]:
    """(key parts, scalar) for every scalar under `value`, in document order."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*parts, str(key)))
    elif isinstance(value, list):
        if parts and _render(value) is not None:
            yield parts, value  # a list of scalars is one setting: its items, in order
        elif parts:
            for i, item in enumerate(value):
                yield from _leaves(item, (*parts[:-1], f"{parts[-1]}[{i}]"))
    elif parts:
        yield parts, value


def _under(parts: tuple[str, ...], prefixes: tuple[tuple[str, ...], ...]) -> bool:
    """Whether the key path `parts` (a list's items indexed: `dependencies[0]`) lies
    under one of `prefixes`."""
    keys = tuple(p.split("[")[0] if p.endswith("]") else p for p in parts)
    return any(keys[: len(prefix)] == prefix for prefix in prefixes)


def _render(value: object) -> str | None:
    if isinstance(value, list):  # one value when every item is a scalar and the whole fits
        if any(isinstance(item, (dict, list)) for item in value):
            return None
        items = [_render(item) for item in value]
        return None if None in items else _fitting(", ".join(str(item) for item in items))
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    else:  # a number or string; a date or datetime as YAML and TOML write them
        text = str(value)
    return _fitting(text.strip())


def _fitting(text: str) -> str | None:
    return text if text and len(text) <= MAX_VALUE and "\n" not in text else None


def _dotted(parts: tuple[str, ...]) -> str:
    return ".".join(p if _PLAIN_KEY.fullmatch(p.split("[")[0]) else json.dumps(p) for p in parts)


def _line_of(lines: list[str], parts: tuple[str, ...]) -> int:
    """1-based line naming each key part in turn (module rules), 1 when none does."""
    at = 0
    for part in parts:
        key = part.split("[")[0]
        needle = re.compile(rf"(^|[\s\"'\[{{,.]){re.escape(key)}([\"'\]]?\s*[:=\]]|[\"']?\s*$)")
        found = next((i for i in range(at, len(lines)) if needle.search(lines[i])), None)
        if found is not None:
            at = found
    return at + 1

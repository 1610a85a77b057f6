"""Write a `Document` back to `.dlm` text, and the starter text `dlm init` writes.

Output layout (the parser's grammar, see `dlm.doc.body`):

    ---
    dlm_id: ...            always written, then dlm_version and base_model;
    dlm_version: 1         every other key only where it differs from its default
    base_model: ...
    ---

    <prose text>           a prose section; `::prose::` precedes it when it follows
                           an instruction section, or follows a prose section and
                           does not itself start with a `# ` heading
    ::instruction::
                           then `### Q` / `### A` blocks, blank-line separated

`serialize_document` checks its own output by parsing it back: text that the
grammar would read differently (a prose line `::instruction::` outside a fence, an
answer holding a `### Q` line, an unclosed fence) is refused instead of written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import ValidationError

from dlm.doc.body import is_heading
from dlm.doc.frontmatter import dotted
from dlm.doc.model import Document, InstructionSection, ProbeSection, ProseSection, QAPair, Section
from dlm.doc.parser import parse_document
from dlm.doc.problems import DocParseError
from dlm.doc.schema import DEFAULT_BASE_MODEL, Frontmatter
from dlm.errors import DocError

# Folders and files `dlm init` leaves out of a source tree: VCS data, caches, builds
# of dependencies. Users edit the list in the frontmatter.
DEFAULT_SOURCE_EXCLUDES = (
    "**/.git/**",
    "**/.hg/**",
    "**/.svn/**",
    "**/__pycache__/**",
    "**/*.pyc",
    "**/node_modules/**",
    "**/.venv/**",
    "**/.mypy_cache/**",
    "**/.pytest_cache/**",
    "**/*.dlm",
)


class _Dumper(yaml.SafeDumper):
    """SafeDumper with indented lists and `|` blocks for multi-line strings."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


# Characters YAML reads as line breaks besides "\n"; PyYAML's plain and single-quoted
# styles do not write them back faithfully, its double-quoted style escapes them.
_OTHER_BREAKS = frozenset("\r\x85\u2028\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    # PyYAML falls back to a quoted style where a block cannot hold the string exactly.
    style = "|" if "\n" in value else None
    if _OTHER_BREAKS.intersection(value):
        style = '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def frontmatter_yaml(fm: Frontmatter) -> str:
    """The frontmatter as YAML: identity keys first, then only non-default values."""
    head: dict[str, Any] = {
        "dlm_id": fm.dlm_id,
        "dlm_version": fm.dlm_version,
        "base_model": fm.base_model,
    }
    rest = {k: v for k, v in fm.model_dump(exclude_defaults=True).items() if k not in head}
    return yaml.dump(head | rest, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=88)


def _pair_text(pair: QAPair) -> str:
    keys = "".join(f"\n- {key}" for key in pair.keys)
    return f"### Q\n{pair.question}\n\n### A\n{pair.answer}" + (f"\n\n### Keys{keys}" if keys else "")


def _section_blocks(sections: Sequence[Section]) -> list[str]:
    blocks: list[str] = []
    previous: Section | None = None
    for section in sections:
        if isinstance(section, (InstructionSection, ProbeSection)):
            blocks.append("::probe::" if isinstance(section, ProbeSection) else "::instruction::")
            blocks.extend(_pair_text(p) for p in section.pairs)
        else:
            starts_heading = is_heading(section.text.split("\n", 1)[0])
            if isinstance(previous, (InstructionSection, ProbeSection)) or (
                previous is not None and not starts_heading
            ):
                blocks.append("::prose::")
            blocks.append(section.text)
        previous = section
    return blocks


def serialize_document(doc: Document) -> str:
    """The `.dlm` text of `doc`; `parse_document` of it equals `doc` (lines aside).

    Raises:
        DocError: some section text cannot be written so that it reads back the same
            (it holds a line the grammar would interpret, or surrounding whitespace
            that parsing strips).
    """
    body = "\n\n".join(_section_blocks(doc.sections))
    text = f"---\n{frontmatter_yaml(doc.frontmatter)}---\n" + (f"\n{body}\n" if body else "")
    try:
        back = parse_document(text)
    except DocParseError as exc:
        raise DocError(f"cannot serialize document: its text would not parse back:\n{exc}") from None
    if back != doc:
        raise DocError(_mismatch(doc, back))
    return text


def _mismatch(doc: Document, back: Document) -> str:
    if back.frontmatter != doc.frontmatter:
        return "cannot serialize document: its frontmatter does not read back the same"
    pairs = zip(doc.sections, back.sections, strict=False)
    i = next((n for n, (mine, theirs) in enumerate(pairs) if mine != theirs), None)
    if i is None:
        i = min(len(doc.sections), len(back.sections))
    return (
        f"cannot serialize document: section {i} would not read back the same (blank text, "
        "outer whitespace in a question or answer, or a line the grammar interprets: "
        "'::name::', '# ' in prose, '### Q'/'### A'/'### Keys' in a pair, a fence)"
    )


def new_document(
    base_model: str = DEFAULT_BASE_MODEL,
    sources: Sequence[str] = (),
    system_prompt: str | None = None,
) -> str:
    """The text of a fresh `.dlm` file, as `dlm init` writes it.

    Args:
        base_model: a base model alias or path, written as `base_model`.
        sources: source folders, as they should appear in `training.sources[].path`
            (relative to the folder the `.dlm` file will live in); each gets the
            default include `**/*` and `DEFAULT_SOURCE_EXCLUDES`.
        system_prompt: written when given.

    Returns:
        Text with a fresh ULID `dlm_id`, one example prose section and one example
        instruction section; it parses with `parse_document`.

    Raises:
        DocError: an argument is not a valid frontmatter value (e.g. an empty path).
    """
    from ulid import ULID

    data: dict[str, Any] = {
        "dlm_id": str(ULID()),
        "base_model": base_model,
        "system_prompt": system_prompt,
    }
    if sources:
        excludes = list(DEFAULT_SOURCE_EXCLUDES)
        data["training"] = {"sources": [{"path": str(p), "exclude": excludes} for p in sources]}
    try:
        fm = Frontmatter.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DocError(f"new document: {dotted(tuple(err['loc'])) or 'value'}: {err['msg']}") from None
    sections = (
        ProseSection(
            "# About this document\n\n"
            "Write what the model should learn here, in plain markdown. Each part that\n"
            "starts with a top-level `# ` heading becomes one training row."
        ),
        InstructionSection(
            (
                QAPair(
                    "What is this document for?",
                    "It teaches the model the facts and style written in it.",
                ),
            )
        ),
    )
    text = serialize_document(Document(fm, sections))
    head, _, body = text.removeprefix("---\n").partition("---\n")
    annotated = f"---\n{_with_commented_training(head, fm)}---\n{body}"
    if parse_document(annotated) != parse_document(text):  # the comments and defaults change nothing
        raise DocError("new document: the annotated frontmatter does not read back the same")
    return annotated


# The training keys a new user should look at, each written at its default with one line
# saying what it does; values come from the schema, so defaults live in one place.
INIT_TRAINING_KEYS: tuple[tuple[str, str], ...] = (
    ("budget", "how much to train when max_steps is unset: tokens (60k) or time (4m); null: no cap"),
    ("learning_rate", "LoRA step size; 3e-3 makes pairs and facts stick on a small model, lower it for long runs"),
    ("target_modules", "the layers LoRA adapts: the MLP; add q_proj, k_proj, v_proj, o_proj for every linear layer"),
    ("lora_r", "rank of each LoRA update: its capacity (and the adapter's size)"),
    ("sequence_len", "longest training example in tokens; longer rows are cut into windows"),
    ("replay", "share of examples that replay the base model's own answers to general questions, so it forgets less"),
)
INIT_EVAL_KEYS: tuple[tuple[str, str], ...] = (
    ("judge", "end dlm train with the probe report (answers of base vs adapter); false saves minutes"),
)


def _with_commented_training(head: str, fm: Frontmatter) -> str:
    """`head` (frontmatter YAML ending in a newline) with the `INIT_TRAINING_KEYS` written
    under `training:` at their values in `fm`, each after a `#` comment line; the rest of
    `training` (sources) follows them."""
    training = fm.training.model_dump()
    lines = head.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line == "training:\n"), None)
    rest: list[str] = []
    if start is not None:
        rest = lines[start + 1 :]
        lines = lines[:start]
    out = ["training:\n"]
    for key, comment in INIT_TRAINING_KEYS:
        out += [f"  # {comment}\n", _indented({key: training[key]}, 2)]
    out.append("  eval:\n")
    for key, comment in INIT_EVAL_KEYS:
        out += [f"    # {comment}\n", _indented({key: training["eval"][key]}, 4)]
    return "".join(lines + out + rest)


def _indented(value: dict[str, Any], spaces: int) -> str:
    """One `key: value` mapping as YAML, a list in flow style on one line, indented."""
    flow = None if any(isinstance(v, list) for v in value.values()) else False
    text = yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=flow, width=200)
    return "".join(" " * spaces + line for line in text.splitlines(keepends=True))

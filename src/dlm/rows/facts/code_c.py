"""Definitions in C and C++, read with the tree-sitter grammars of
`tree-sitter-language-pack`, as facts of the kinds `dlm.rows.facts.code_ts` gives:

    where      a function defined without `static`; a named struct, union, enum, class or
               typedef; a constant -> its file
    purpose    the same with a comment right above it (a constant: or after it on its
               line) -> the comment's first sentence (`dlm.rows.synth.first_sentence`)
    signature  a function without `static` (its prototype in a header, its definition in
               a source file) or a public method -> its result type, name and parameters
    value      a constant -> its literal, as written

A constant is `#define NAME literal` or a variable declared `const` or `constexpr` with a
literal initializer (a number, a string, a character; parenthesized or negated).

C has no doc-comment syntax of its own, so any comment block that ends on the line above
a definition is its doc comment (`//`, `/* */`, Doxygen's `/** */` and `///`); a
kernel-doc opening such as "open_link() - " is left out of the sentence, and a copyright
or licence header is no doc comment. A prototype gives
no `where` fact: a function is defined where its body is. Walked: the top level, the
blocks of `#if`/`#ifdef`/`#ifndef` (include guards), `extern "C"`, and in C++ namespaces
and `template` declarations. A C++ method is read when it is public (under `public:` in
a class; a struct's members are public until an access specifier); its name is
`Class::method`, its subject the class.

C's macros leave many real files with error nodes (system headers: `__THROW`,
`__BEGIN_DECLS`), so a definition whose subtree holds an error is skipped and the rest of
the file is read; "syntax error at line N" only when nothing could be read. A `.h` file
is read as C++ when it holds `class`, `namespace`, `template`, an access specifier or a
`::` (C reads `class Ring {` as a function), else as C, and as the other language when
that leaves an error node and reads more.
"""

from __future__ import annotations

import re

from dlm.rows.facts.code_ts import NO_GRAMMARS, Node, Reader, comment_text, error_line, node_text, parse
from dlm.rows.facts.model import Fact
from dlm.rows.synth import MAX_LITERAL, first_sentence

# a C literal as a `#define` writes it: a number with its suffix, a string, a character
_LITERAL = re.compile(
    r"""-?(?:0[xX][0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?)[uUlLfF]*"""
    r"""|"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)+'"""
)
_LITERAL_NODES = frozenset({"number_literal", "string_literal", "char_literal", "true", "false", "raw_string_literal"})
_BLOCKS = frozenset({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif", "preproc_elifdef"})
_TYPES = {
    "struct_specifier": "struct",
    "union_specifier": "union",
    "enum_specifier": "enum",
    "class_specifier": "class",
}
_LICENCE = re.compile(r"\(c\)|copyright\b|spdx-license-identifier|licen[cs]ed under\b", re.I)
_MARKER = re.compile(r"^\s*(/\*+!?|\*+/|\*+|//[/!]?)")  # any comment's opener, a line's `*`
_KERNEL_DOC = re.compile(r"^\w+(?:\(\))?\s+-\s+")
# what C cannot parse (C parses `class Ring {` as a function of type `class`, without error)
_CPP = re.compile(r"^\s*(?:class|namespace|template)\b|\b(?:public|private|protected)\s*:|\w::\w", re.M)


def c_facts(relpath: str, text: str, kind: str) -> list[Fact] | str:
    """The facts of one C (`kind` "c") or C++ ("cpp") file in source order, or why there
    are none ("syntax error at line N"). `kind`: `dlm.rows.facts.files.source_kind`."""
    languages: tuple[str, ...] = (kind,)
    if kind == "c" and relpath.endswith(".h"):
        languages = ("cpp", "c") if _CPP.search(text) else ("c", "cpp")
    best: tuple[Node, list[Fact]] | None = None
    for language in languages:
        try:
            tree = parse(language, text)
        except ImportError:
            return NO_GRAMMARS
        reader = _CReader(relpath, language)
        _walk(reader, tree.root_node)
        if not tree.root_node.has_error:
            return reader.facts
        if best is None or len(reader.facts) > len(best[1]):
            best = (tree.root_node, reader.facts)
    assert best is not None
    root, facts = best
    return facts or f"syntax error at line {error_line(root)}"


class _CReader(Reader):
    """A `Reader` with C's comments as doc comments (module rules)."""

    def __init__(self, path: str, kind: str) -> None:
        super().__init__(path)
        self.cpp = kind == "cpp"

    def doc(self, node: Node) -> str | None:
        lines: list[str] = []
        above, row = node.prev_sibling, int(node.start_point[0])
        if above is not None and above.type != "comment" and above.named_children:
            above = above.named_children[-1]  # a comment a macro call without `;` took in
        while above is not None and above.type == "comment" and int(above.end_point[0]) == row - 1:
            if int(above.start_point[0]) == int(above.end_point[0]) and above.prev_sibling is not None:
                if int(above.prev_sibling.end_point[0]) == int(above.start_point[0]):
                    break  # a comment after the code of the line above belongs to that code
            lines[:0] = above.text.decode("utf-8", "replace").splitlines()
            row, above = int(above.start_point[0]), above.prev_sibling
        if not lines:
            lines = [c.text.decode("utf-8", "replace") for c in _trailing(node)]
        text = _KERNEL_DOC.sub("", comment_text(lines, _MARKER, ("@", "\\param", "\\return")).strip())
        if _LICENCE.match(text):
            return None  # a file's header comment right above its first definition
        if re.match(r"[a-z]+\b", text):  # a trailing comment's "the name in logs"
            text = text[0].upper() + text[1:]
        return first_sentence(text) if text else None


def _trailing(node: Node) -> list[Node]:
    """The comment after `node` on its line: inside a `#define`, or the next sibling."""
    inside = [c for c in node.children if c.type == "comment" and c.start_point[0] == node.start_point[0]]
    after = node.next_sibling
    if not inside and after is not None and after.type == "comment":
        if int(after.start_point[0]) == int(node.end_point[0]):
            return [after]
    return inside[:1]


def _walk(reader: _CReader, root: Node) -> None:
    for node in root.named_children:
        if node.type in _BLOCKS or node.type in ("linkage_specification", "namespace_definition", "ERROR"):
            body = node.child_by_field_name("body")
            _walk(reader, body if body is not None else node)
        elif node.type == "template_declaration" and not node.has_error:
            inner = [c for c in node.named_children if c.type != "template_parameter_list"]
            for item in inner[-1:]:
                _definition(reader, item, at=node)
        elif not node.has_error:
            _definition(reader, node, at=node)


def _definition(reader: _CReader, node: Node, at: Node) -> None:
    """One top-level definition `node` (`at`: the node its comment sits above)."""
    if node.type == "preproc_def":
        name, value = node_text(node.child_by_field_name("name")), _macro_value(node.child_by_field_name("value"))
        if value is not None and not _guard(node, name) and reader.define(at, name, "macro"):
            _value(reader, at, name, value)
    elif node.type in ("function_definition", "declaration"):
        _function_or_constant(reader, node, at)
    elif node.type == "type_definition":
        for declarator in node.children_by_field_name("declarator"):
            if declarator.type == "type_identifier":
                reader.define(at, node_text(declarator), "type")
        inner = node.child_by_field_name("type")
        if inner is not None and inner.type in _TYPES and inner.child_by_field_name("body") is not None:
            _type(reader, inner, at, where=False)
    elif node.type in _TYPES and node.child_by_field_name("body") is not None:
        _type(reader, node, at)


def _guard(node: Node, name: str) -> bool:
    """Whether the `#define` `node` of `name` is its header's include guard."""
    parent = node.parent
    return (
        parent is not None and parent.type == "preproc_ifdef" and node_text(parent.child_by_field_name("name")) == name
    )


def _type(reader: _CReader, node: Node, at: Node, where: bool = True) -> None:
    name = node_text(node.child_by_field_name("name"))
    if not name or "::" in name:
        return
    if where:
        reader.define(at, name, _TYPES[node.type])
    if reader.cpp and node.type in ("class_specifier", "struct_specifier"):
        _members(reader, node, name)


def _members(reader: _CReader, node: Node, owner: str) -> None:
    """A C++ class's public methods and constants (module rules)."""
    public = node.type == "struct_specifier"
    body = node.child_by_field_name("body")
    for item in body.named_children if body is not None else ():
        if item.type == "access_specifier":
            public = node_text(item).startswith("public")
        elif public and not item.has_error and item.type in ("field_declaration", "function_definition", "declaration"):
            _function_or_constant(reader, item, item, owner)


def _function_or_constant(reader: _CReader, node: Node, at: Node, owner: str | None = None) -> None:
    """A declaration or definition `node`: a function's facts, or a constant's; `owner`:
    the C++ class it is a member of."""
    words = {node_text(c) for c in node.children if c.type in ("storage_class_specifier", "type_qualifier")}
    declarator = node.child_by_field_name("declarator")
    if declarator is None:
        return
    function = _function_declarator(declarator)
    if function is not None:
        if "static" in words and owner is None:
            return
        leaf = node_text(function.child_by_field_name("declarator"))
        if not re.fullmatch(r"~?[A-Za-z_]\w*", leaf):
            return  # an operator, or a method defined outside its class (`Pool::open`)
        name = f"{owner}::{leaf}" if owner else leaf
        what = "method" if owner else "function"
        defined = node.type == "function_definition" and owner is None
        if reader.define(at, name, what, owner, where=defined):
            params = function.child_by_field_name("parameters")
            result = node_text(node.child_by_field_name("type"))
            # what follows the parameters (`__THROW`, `const`, `override`) is left out
            end = params.end_byte if params is not None else declarator.end_byte
            written = declarator.text[: end - declarator.start_byte].decode("utf-8", "replace")
            text = f"{result} {' '.join(written.split())}".strip()
            named = [c for c in (params.named_children if params is not None else ()) if node_text(c) != "void"]
            reader.signature(at, name, what, text, owner or name, bool(named))
        return
    if not words & {"const", "constexpr"} or "extern" in words:
        return
    if declarator.type == "init_declarator":
        target, value = declarator.child_by_field_name("declarator"), declarator.child_by_field_name("value")
    else:  # a class member's `= 1.5` is its field declaration's
        target, value = declarator, node.child_by_field_name("default_value")
    literal = _literal(value)
    if target is None or target.type not in ("identifier", "field_identifier") or literal is None:
        return
    name = f"{owner}::{node_text(target)}" if owner else node_text(target)
    if reader.define(at, name, "constant", owner, where=owner is None):
        _value(reader, at, name, literal, owner)


def _function_declarator(node: Node) -> Node | None:
    """The `function_declarator` under pointer and reference declarators, or None."""
    while node is not None and node.type in ("pointer_declarator", "reference_declarator"):
        node = node.child_by_field_name("declarator") or (node.named_children[-1] if node.named_children else None)
    return node if node is not None and node.type == "function_declarator" else None


def _literal(value: Node | None) -> str | None:
    """An initializer's text when it is one literal (negated or parenthesized), else None."""
    if value is None:
        return None
    if value.type in _LITERAL_NODES:
        return node_text(value)
    return _macro_value(value) if value.type in ("unary_expression", "parenthesized_expression") else None


def _macro_value(value: Node | None) -> str | None:
    """A `#define`'s value when it is one literal (parentheses and comments taken off)."""
    if value is None:
        return None
    text = re.sub(r"/\*.*?\*/|//.*", "", value.text.decode("utf-8", "replace")).strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    return text if _LITERAL.fullmatch(text) else None


def _value(reader: _CReader, node: Node, name: str, literal: str, owner: str | None = None) -> None:
    if len(literal) <= MAX_LITERAL:
        line = int(node.start_point[0]) + 1
        reader.facts.append(Fact("value", reader.path, line, name, "constant", literal, owner or name))

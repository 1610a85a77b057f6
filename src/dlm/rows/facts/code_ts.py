"""Definitions in Go, Rust, JavaScript/TypeScript and Java, read with the tree-sitter
grammars of `tree-sitter-language-pack` (compiled into its wheel: nothing is fetched).

The same fact kinds as Python's (`dlm.rows.synth`), for the public top level:

    where      a public function, type, class, interface or constant -> its file
    purpose    the same with a doc comment -> the comment's first sentence
               (`dlm.rows.synth.first_sentence`)
    signature  a public function or method -> its parameters and result, as written
    value      a public constant bound to a literal -> the literal, as written

Public means: Go, a capitalised name (a method also needs a capitalised receiver
type); Rust, `pub` (a method: `pub` inside an inherent `impl`); JavaScript and
TypeScript, under `export` or named by an export list (`export { a }`, CommonJS's
`module.exports = { a }`, `exports.b = b`); Java, a `public` class and its `public` methods and
`public static final` fields. A doc comment is the comment block right above the
definition (Go `//`, Rust `///`, JavaScript/TypeScript/Java `/** */`; a JSDoc
`@param` line and what follows it are not part of the sentence). A method's subject
(the probe split's unit) is its type. A file whose tree holds an error node gives
"syntax error at line N" (the first error's line) and no facts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from dlm.rows.facts.model import Fact
from dlm.rows.synth import MAX_LITERAL, MAX_SIGNATURE, first_sentence

Node = Any  # tree_sitter.Node: the package ships no stubs mypy reads in every setup

_LITERALS = frozenset(
    """int_literal float_literal imaginary_literal rune_literal interpreted_string_literal raw_string_literal
    true false nil integer_literal string_literal char_literal boolean_literal negative_literal number string
    null template_string decimal_integer_literal hex_integer_literal decimal_floating_point_literal
    character_literal null_literal""".split()
)
_COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
_DOC_MARKER = re.compile(r"^\s*(/\*\*+|\*/|\*|///?)")
_SKIPPED_ABOVE = frozenset({"attribute_item", "decorator", "annotation", "marker_annotation"})


@cache
def _parser(language: str) -> Any:
    from tree_sitter_language_pack import get_parser

    return get_parser(language)  # type: ignore[arg-type]


NO_GRAMMARS = "no tree-sitter grammars: install tree-sitter-language-pack"


def code_facts(relpath: str, text: str, kind: str) -> list[Fact] | str:
    """The facts of one Go, Rust, JavaScript, TypeScript or Java file in source order,
    or "syntax error at line N". `kind`: `dlm.rows.facts.files.source_kind`."""
    try:
        tree = parse("tsx" if relpath.endswith(".tsx") else kind, text)
    except ImportError:
        return NO_GRAMMARS
    if tree.root_node.has_error:
        return f"syntax error at line {error_line(tree.root_node)}"
    reader = Reader(relpath)
    _READERS[kind](reader, tree.root_node)
    return reader.facts


def parse(language: str, text: str) -> Any:
    """`text`'s tree-sitter tree in the grammar `language` ("go", "tsx", "c", ...).

    Raises:
        ImportError: `tree-sitter-language-pack` is not installed.
    """
    return _parser(language).parse(text.encode("utf-8", "replace"))


def error_line(root: Node) -> int:
    """The 1-based line of the first error or missing node under `root`."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "ERROR" or node.is_missing:
            return int(node.start_point[0]) + 1
        stack.extend(reversed([c for c in node.children if c.has_error or c.is_missing]))
    return int(root.start_point[0]) + 1


def node_text(node: Node | None) -> str:
    """A node's source text, whitespace collapsed; "" for None."""
    return "" if node is None else " ".join(node.text.decode("utf-8", "replace").split())


class Reader:
    """Collects one file's facts; a name is read once (the first definition wins). A
    language whose doc comments differ overrides `doc`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.facts: list[Fact] = []
        self.seen: set[str] = set()

    def define(self, node: Node, name: str, what: str, subject: str | None = None, *, where: bool = True) -> bool:
        if not name or name in self.seen:
            return False
        self.seen.add(name)
        line = int(node.start_point[0]) + 1
        if where:
            self.facts.append(Fact("where", self.path, line, name, what, self.path, subject or name))
        sentence = self.doc(node)
        if sentence:
            self.facts.append(Fact("purpose", self.path, line, name, what, sentence, subject or name))
        return True

    def doc(self, node: Node) -> str | None:
        """The first sentence of `node`'s doc comment (module rules), or None."""
        return _doc_sentence(node)

    def signature(self, node: Node, name: str, what: str, text: str, subject: str, worth: bool) -> None:
        """A signature fact, when `worth` (a named parameter or a result: `close()` tells
        nothing) and not over `MAX_SIGNATURE`."""
        if worth and len(text) <= MAX_SIGNATURE:
            line = int(node.start_point[0]) + 1
            self.facts.append(Fact("signature", self.path, line, name, what, text, subject))

    def value(self, node: Node, name: str, value: Node | None, subject: str | None = None) -> None:
        if value is not None and value.type == "unary_expression" and value.named_child_count == 1:
            literal = value.named_children[0].type in _LITERALS
        else:
            literal = value is not None and value.type in _LITERALS
        if value is not None and value.type == "template_string":
            literal = value.named_child_count <= 1 and all(c.type == "string_fragment" for c in value.named_children)
        text = node_text(value)
        if literal and len(text) <= MAX_LITERAL and "\n" not in text:
            line = int(node.start_point[0]) + 1
            self.facts.append(Fact("value", self.path, line, name, "constant", text, subject or name))


def _doc_sentence(node: Node) -> str | None:
    """The first sentence of the doc comment right above `node` (module rules)."""
    lines: list[str] = []
    above = node.prev_sibling
    row = int(node.start_point[0])
    while above is not None and above.type in _SKIPPED_ABOVE:
        row, above = int(above.start_point[0]), above.prev_sibling
    while above is not None and above.type in _COMMENTS and int(above.end_point[0]) >= row - 1:
        raw = above.text.decode("utf-8", "replace")
        if raw.startswith("/*") and not raw.startswith("/**"):
            break
        if above.type == "line_comment" and not raw.startswith("///"):
            break
        lines[:0] = raw.splitlines()
        row, above = int(above.start_point[0]), above.prev_sibling
    text = comment_text(lines, _DOC_MARKER, ("@",))
    return first_sentence(text) if text.strip() else None


def comment_text(lines: list[str], marker: re.Pattern[str], stops: tuple[str, ...]) -> str:
    """A comment block's text: each line without its `marker` (`/**`, ` * `, `///`) and a
    closing `*/`, stripped, up to the first line opening with one of `stops` (a JSDoc
    `@param`: what follows is not the sentence); lines joined by newlines."""
    cleaned: list[str] = []
    for line in lines:
        line = marker.sub("", line).removesuffix("*/").strip()
        if line.startswith(stops):
            break
        cleaned.append(line)
    return "\n".join(cleaned)


def _go(reader: Reader, root: Node) -> None:
    for node in root.named_children:
        if node.type == "const_declaration":
            specs = [c for c in node.named_children if c.type == "const_spec"]
            for spec in specs:
                names = spec.children_by_field_name("name")
                name = node_text(names[0]) if len(names) == 1 else ""
                if name[:1].isupper() and reader.define(node if len(specs) == 1 else spec, name, "constant"):
                    values = spec.child_by_field_name("value")
                    reader.value(
                        spec, name, values.named_children[0] if values and values.named_child_count == 1 else None
                    )
        elif node.type == "function_declaration":
            name = node_text(node.child_by_field_name("name"))
            if name[:1].isupper() and reader.define(node, name, "function"):
                _go_signature(reader, node, name, name, "function")
        elif node.type == "method_declaration":
            receiver = re.findall(r"[A-Za-z_]\w*", node_text(node.child_by_field_name("receiver")))
            owner, leaf = (receiver[-1] if receiver else ""), node_text(node.child_by_field_name("name"))
            name = f"{owner}.{leaf}"
            if owner[:1].isupper() and leaf[:1].isupper() and reader.define(node, name, "method", owner, where=False):
                _go_signature(reader, node, name, owner, "method")
        elif node.type == "type_declaration":
            specs = [c for c in node.named_children if c.type == "type_spec"]
            for spec in specs:
                name = node_text(spec.child_by_field_name("name"))
                kind = spec.child_by_field_name("type")
                what = {"struct_type": "struct", "interface_type": "interface"}.get(kind.type if kind else "", "type")
                if name[:1].isupper():
                    reader.define(node if len(specs) == 1 else spec, name, what)


def _go_signature(reader: Reader, node: Node, name: str, subject: str, what: str) -> None:
    params = node.child_by_field_name("parameters")
    result = node_text(node.child_by_field_name("result"))
    leaf = name.rsplit(".", 1)[-1]
    text = f"{leaf}{node_text(params)}" + (f" {result}" if result else "")
    reader.signature(node, name, what, text, subject, bool(params and params.named_child_count) or bool(result))


def _public(node: Node) -> bool:
    return any(c.type == "visibility_modifier" and node_text(c) == "pub" for c in node.children)


def _rust(reader: Reader, root: Node) -> None:
    what_of = {"struct_item": "struct", "enum_item": "enum", "trait_item": "trait", "type_item": "type"}
    for node in root.named_children:
        name = node_text(node.child_by_field_name("name"))
        if node.type in ("const_item", "static_item") and _public(node) and reader.define(node, name, "constant"):
            reader.value(node, name, node.child_by_field_name("value"))
        elif node.type == "function_item" and _public(node) and reader.define(node, name, "function"):
            _rust_signature(reader, node, name, name, "function")
        elif node.type in what_of and _public(node):
            reader.define(node, name, what_of[node.type])
        elif node.type == "impl_item" and node.child_by_field_name("trait") is None:
            owner = re.split(r"[<\s]", node_text(node.child_by_field_name("type")))[0]
            body = node.child_by_field_name("body")
            for item in body.named_children if body else ():
                qual = f"{owner}.{node_text(item.child_by_field_name('name'))}"
                if (
                    item.type == "function_item"
                    and _public(item)
                    and reader.define(item, qual, "method", owner, where=False)
                ):
                    _rust_signature(reader, item, qual, owner, "method")


def _rust_signature(reader: Reader, node: Node, name: str, subject: str, what: str) -> None:
    params = node.child_by_field_name("parameters")
    returns = node_text(node.child_by_field_name("return_type"))
    leaf = name.rsplit(".", 1)[-1]
    text = f"{leaf}{node_text(params)}" + (f" -> {returns}" if returns else "")
    named = [c for c in (params.named_children if params else ()) if c.type == "parameter"]
    reader.signature(node, name, what, text, subject, bool(named) or bool(returns))


_SCRIPT_KINDS = {
    "class_declaration": "class",
    "abstract_class_declaration": "class",
    "interface_declaration": "interface",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
}
# `module.exports.name = ...` and `exports.name = ...`: CommonJS's one-name exports
_COMMONJS_TARGET = re.compile(r"(?:module\.)?exports\.[A-Za-z_$][\w$]*")


def _script(reader: Reader, root: Node) -> None:
    listed = _listed_exports(root)
    for node in root.named_children:
        if node.type == "export_statement":
            declaration = node.child_by_field_name("declaration")
            if declaration is not None:
                _script_declaration(reader, node, declaration, None)
        else:
            _script_declaration(reader, node, node, listed)


def _listed_exports(root: Node) -> set[str]:
    """The top-level names a file exports by name rather than at their declaration: an
    ES module's `export { a, b as c }` and `export default a`, and CommonJS's
    `module.exports = { a, c: b }`, `module.exports = a` and `exports.c = b` (a name
    bound to another, `c: b`, is public as `b`, the name its definition carries)."""
    names: set[str] = set()
    for node in root.named_children:
        if node.type == "export_statement" and node.child_by_field_name("source") is None:
            clauses = [c for c in node.named_children if c.type == "export_clause"]
            for spec in (s for clause in clauses for s in clause.named_children if s.type == "export_specifier"):
                names.add(node_text(spec.child_by_field_name("name")))
            value = node.child_by_field_name("value")
            if value is not None and value.type == "identifier":
                names.add(node_text(value))
        elif node.type == "expression_statement" and node.named_child_count == 1:
            assign = node.named_children[0]
            if assign.type != "assignment_expression":
                continue
            target, value = node_text(assign.child_by_field_name("left")), assign.child_by_field_name("right")
            if value is None or not (target == "module.exports" or _COMMONJS_TARGET.fullmatch(target)):
                continue
            if value.type == "identifier":
                names.add(node_text(value))
            elif value.type == "object" and target == "module.exports":
                for item in value.named_children:
                    bound = item.child_by_field_name("value") if item.type == "pair" else item
                    if bound is not None and bound.type in ("identifier", "shorthand_property_identifier"):
                        names.add(node_text(bound))
    return names


def _script_declaration(reader: Reader, at: Node, node: Node, listed: set[str] | None) -> None:
    """The facts of one top-level declaration `node`, read at `at` (its `export`
    statement, whose comment is its doc, or `node` itself); with `listed` set, only the
    names in it (`_listed_exports`) are public."""

    def public(name: str) -> bool:
        return listed is None or name in listed

    if node.type in ("function_declaration", "generator_function_declaration"):
        name = node_text(node.child_by_field_name("name"))
        if public(name) and _exported(reader, at, name, "function"):
            _script_signature(reader, at, node, name)
    elif node.type in _SCRIPT_KINDS:
        name = node_text(node.child_by_field_name("name"))
        if public(name):
            _exported(reader, at, name, _SCRIPT_KINDS[node.type])
    elif node.type in ("lexical_declaration", "variable_declaration") and node_text(node).startswith("const"):
        for declarator in (c for c in node.named_children if c.type == "variable_declarator"):
            name, value = node_text(declarator.child_by_field_name("name")), declarator.child_by_field_name("value")
            if not public(name):
                continue
            if value is not None and value.type in ("arrow_function", "function_expression", "function"):
                if _exported(reader, at, name, "function"):
                    _script_signature(reader, at, value, name)
            elif _exported(reader, at, name, "constant"):
                reader.value(at, name, value)


def _exported(reader: Reader, export: Node, name: str, what: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z_$][\w$]*", name)) and reader.define(export, name, what)


def _script_signature(reader: Reader, at: Node, node: Node, name: str) -> None:
    params = node.child_by_field_name("parameters")
    returns = node_text(node.child_by_field_name("return_type"))
    text = f"{name}{node_text(params)}{returns}"
    reader.signature(at, name, "function", text, name, bool(params and params.named_child_count) or bool(returns))


def _java(reader: Reader, root: Node) -> None:
    for node in root.named_children:
        if node.type not in ("class_declaration", "interface_declaration", "enum_declaration", "record_declaration"):
            continue
        owner = node_text(node.child_by_field_name("name"))
        if "public" not in _modifiers(node) or not reader.define(node, owner, node.type.split("_")[0]):
            continue
        body = node.child_by_field_name("body")
        for item in body.named_children if body else ():
            mods = _modifiers(item)
            if item.type == "method_declaration" and "public" in mods:
                name = f"{owner}.{node_text(item.child_by_field_name('name'))}"
                if reader.define(item, name, "method", owner, where=False):
                    params = item.child_by_field_name("parameters")
                    text = f"{node_text(item.child_by_field_name('type'))} {name.rsplit('.', 1)[-1]}{node_text(params)}"
                    reader.signature(item, name, "method", text, owner, bool(params and params.named_child_count))
            elif item.type == "field_declaration" and {"public", "static", "final"} <= mods:
                declarator = item.child_by_field_name("declarator")
                name = f"{owner}.{node_text(declarator.child_by_field_name('name') if declarator else None)}"
                if declarator is not None and reader.define(item, name, "constant", owner, where=False):
                    reader.value(item, name, declarator.child_by_field_name("value"), owner)


def _modifiers(node: Node) -> set[str]:
    mods = next((c for c in node.children if c.type == "modifiers"), None)
    return set(node_text(mods).split()) if mods is not None else set()


_READERS: dict[str, Callable[[Reader, Node], None]] = {
    "go": _go,
    "rust": _rust,
    "javascript": _script,
    "typescript": _script,
    "java": _java,
}

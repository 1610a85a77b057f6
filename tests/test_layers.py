"""The package's floors: every import (module level or inside a function, absolute or
relative) runs down or sideways, never up; the packages form no circle, and neither do
the modules inside a package; the CLI imports only the action layer and the ground, and
from the action layer only what it defines (its types aside), never an engine helper
passed through. docs/architecture.md draws the floors."""

import ast
import importlib
import inspect
from collections import defaultdict
from pathlib import Path

import dlm

SRC = Path(dlm.__file__).parent

# floor of each top-level unit; a unit may import its own floor's units or lower ones
FLOORS = {
    "errors": 0,
    "atomic": 0,
    "canonical": 0,
    "keyed": 0,
    "paths": 0,
    "chat": 0,
    "defaults": 0,
    "sqlitedb": 0,
    "metrics": 0,
    "cpu_isa": 0,
    "__init__": 0,
    "doc": 1,
    "lock": 1,
    "store": 1,
    "models": 1,
    "rows": 2,
    "tokenize": 2,
    "infer": 2,
    "cache": 3,
    "train": 3,
    "serve": 3,
    "export": 3,
    "judge": 3,
    "actions": 4,
    "cli": 5,
    "__main__": 5,
}
# what the CLI may import besides itself: the action layer and the ground
CLI_MAY_IMPORT = {"actions", "errors", "defaults", "__init__"}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC).with_suffix("")
    parts = ["dlm", *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    """True when `name` (dotted, under dlm) is a module or package file in SRC."""
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (SRC / rel).with_suffix(".py").is_file() or (SRC / rel / "__init__.py").is_file()


def resolve(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ImportFrom names (relative imports resolved)."""
    if node.level == 0:
        return node.module or ""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def module_imports() -> list[tuple[str, str, str, list[str]]]:
    """(importing module, imported module, where, names) for every `dlm` import; `from
    pkg import sub` names the submodule when `sub` is one."""
    found = []
    for path in SRC.rglob("*.py"):
        me = module_name(path)
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[tuple[str, list[str]]] = []
            if isinstance(node, ast.ImportFrom):
                base = resolve(path, node)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append((sub, []) if is_module(sub) else (base, [alias.name]))
            elif isinstance(node, ast.Import):
                targets = [(a.name, []) for a in node.names]
            for target, names in targets:
                if target.split(".")[0] == "dlm":
                    found.append((me, target, f"{path.relative_to(SRC)}:{node.lineno}", names))
    return found


def imports() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, where) for every `dlm` import in the package."""
    return [(unit_of(src), unit_of(dst), where) for src, dst, where, _ in module_imports()]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path + [node, nxt]
            if nxt not in state and (cycle := visit(nxt, path + [node])):
                return cycle
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [])):
            return cycle
    return None


def test_every_unit_has_a_floor():
    units = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in SRC.rglob("*.py")}
    assert units <= set(FLOORS), f"give these a floor in FLOORS: {sorted(units - set(FLOORS))}"


def test_no_import_runs_up_a_floor():
    upward = [
        f"{where}: {src} (floor {FLOORS[src]}) imports {dst} (floor {FLOORS[dst]})"
        for src, dst, where in imports()
        if FLOORS[dst] > FLOORS[src]
    ]
    assert upward == []


def test_the_cli_imports_only_actions_and_the_ground():
    stray = [
        f"{where}: cli imports dlm.{dst}"
        for src, dst, where in imports()
        if src == "cli" and dst != "cli" and dst not in CLI_MAY_IMPORT
    ]
    assert stray == []


def passed_through(module: str, name: str) -> bool:
    """True when `module` holds `name` only because it imported it (a function from an
    engine), not because it defines it; classes (the values an action takes and gives)
    may be passed through."""
    value = getattr(importlib.import_module(module), name)
    if inspect.isclass(value) or inspect.ismodule(value):
        return False
    return getattr(value, "__module__", module) != module and not (
        getattr(value, "__module__", "").startswith("dlm.actions")
    )


def test_the_cli_takes_no_engine_helper_through_the_action_layer():
    stray = [
        f"{where}: {dst}.{name} is {getattr(importlib.import_module(dst), name).__module__}'s"
        for src, dst, where, names in module_imports()
        if unit_of(src) == "cli" and unit_of(dst) == "actions"
        for name in names
        if passed_through(dst, name)
    ]
    assert stray == []


def test_packages_form_no_circle():
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _ in imports():
        if src != dst:
            graph[src].add(dst)
    assert find_cycle(graph) is None


def test_modules_inside_a_package_form_no_circle():
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _, _ in module_imports():
        if src != dst and unit_of(src) == unit_of(dst) and not src.startswith(dst + "."):
            graph[src].add(dst)  # a module importing its own package's __init__ is its parent, not a peer
    assert find_cycle(graph) is None


def test_the_checker_sees_a_planted_upward_import(tmp_path, monkeypatch):
    """The walk above would miss nothing: an upward import planted in a copy is found."""
    planted = tmp_path / "dlm"
    (planted / "rows").mkdir(parents=True)
    (planted / "rows" / "bad.py").write_text("def f():\n    from dlm.actions import train\n")
    monkeypatch.setattr(__import__(__name__), "SRC", planted)
    assert [(s, d) for s, d, _ in imports()] == [("rows", "actions")]


def test_the_checker_follows_relative_imports_and_sees_a_module_circle(tmp_path, monkeypatch):
    planted = tmp_path / "dlm"
    (planted / "train").mkdir(parents=True)
    (planted / "train" / "__init__.py").write_text("")
    (planted / "train" / "a.py").write_text("from .b import x\n")
    (planted / "train" / "b.py").write_text("def f():\n    from . import a\n")
    (planted / "rows").mkdir()
    (planted / "rows" / "c.py").write_text("from ..actions import train\n")
    monkeypatch.setattr(__import__(__name__), "SRC", planted)
    assert ("rows", "actions") in [(s, d) for s, d, _ in imports()]
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _, _ in module_imports():
        if src != dst and unit_of(src) == unit_of(dst) and not src.startswith(dst + "."):
            graph[src].add(dst)
    assert find_cycle(graph) == ["dlm.train.a", "dlm.train.b", "dlm.train.a"]


def test_the_checker_sees_an_engine_helper_passed_through_actions():
    assert passed_through("dlm.actions.training.plan", "build_rows")  # an engine function imported there
    assert not passed_through("dlm.actions.training", "TrainOptions")  # a type the action takes
    assert not passed_through("dlm.actions.training", "train")  # the action itself

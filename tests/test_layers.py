"""The package's floors: every import (module level or inside a function) runs down or
sideways, never up, and the packages form no circle. docs/architecture.md draws them."""

import ast
from collections import defaultdict
from pathlib import Path

import dlm

SRC = Path(dlm.__file__).parent

# floor of each top-level unit; a unit may import its own floor's units or lower ones
FLOORS = {
    "errors": 0, "atomic": 0, "canonical": 0, "paths": 0, "chat": 0, "defaults": 0, "sqlitedb": 0,
    "metrics": 0, "isa": 0, "__init__": 0,
    "doc": 1, "lock": 1, "store": 1, "models": 1,
    "rows": 2, "tokenize": 2, "infer": 2,
    "cache": 3, "train": 3, "serve": 3, "export": 3, "judge": 3,
    "actions": 4,
    "cli": 5, "__main__": 5,
}
# what the CLI may import besides itself: the action layer and the ground
CLI_MAY_IMPORT = {"actions", "errors", "defaults", "__init__"}


def unit_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> list[tuple[str, str, str]]:
    """(importing unit, imported unit, where) for every `dlm` import in the package."""
    found = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC)
        unit = rel.parts[0].removesuffix(".py")
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module == "dlm" and node.level == 0:
                # `from dlm import x`: the submodule x, or a name of the package itself
                names = [f"dlm.{a.name}" if a.name in FLOORS else "dlm" for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.split(".")[0] == "dlm":
                    found.append((unit, unit_of(name), f"{rel}:{node.lineno}"))
    return found


def test_every_unit_has_a_floor():
    units = {p.relative_to(SRC).parts[0].removesuffix(".py") for p in SRC.rglob("*.py")}
    assert units <= set(FLOORS), f"give these a floor in FLOORS: {sorted(units - set(FLOORS))}"


def test_no_import_runs_up_a_floor():
    upward = [f"{where}: {src} (floor {FLOORS[src]}) imports {dst} (floor {FLOORS[dst]})"
              for src, dst, where in imports() if FLOORS[dst] > FLOORS[src]]
    assert upward == []


def test_the_cli_imports_only_actions_and_the_ground():
    stray = [f"{where}: cli imports dlm.{dst}" for src, dst, where in imports()
             if src == "cli" and dst != "cli" and dst not in CLI_MAY_IMPORT]
    assert stray == []


def test_packages_form_no_circle():
    graph: dict[str, set[str]] = defaultdict(set)
    for src, dst, _ in imports():
        if src != dst:
            graph[src].add(dst)
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

    for unit in sorted(graph):
        if unit not in state:
            assert visit(unit, []) is None


def test_the_checker_sees_a_planted_upward_import(tmp_path, monkeypatch):
    """The walk above would miss nothing: an upward import planted in a copy is found."""
    planted = tmp_path / "dlm"
    (planted / "rows").mkdir(parents=True)
    (planted / "rows" / "bad.py").write_text("def f():\n    from dlm.actions import train\n")
    monkeypatch.setattr(__import__(__name__), "SRC", planted)
    assert [(s, d) for s, d, _ in imports()] == [("rows", "actions")]

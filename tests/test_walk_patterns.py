"""The walk takes exactly the files `pathspec` selects, with both listers.

The oracle is pathspec itself, applied per path as the walk's rules say
(`dlm.rows.walk`): a file is taken when the include spec matches it, the exclude spec
does not, and the exclude spec matches none of its folders (`dir/`, pruned unlisted).
Random pattern sets over random trees; a longer fuzz runs under `-m slow`.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from types import SimpleNamespace

import pathspec
import pytest

from dlm.rows import nativelist
from dlm.rows.walk import walk_sources

NAMES = ["a", "b", "ab", "x1.py", "xa.py", "b.txt", "#c", "c.py", "ba"]
PATTERNS = [
    "**/",
    "*/",
    "/**/",
    "**/*/",
    "**/**/",
    "!a",
    "!*.py",
    "!b/",
    r"\#c",
    "/a",
    "a/",
    "[ab]*",
    "x?.py",
    "**/a/**/b.txt",
    "*.py",
    "b.txt",
    "**",
    "*",
    "**/*",
    "a/**",
    "**/b/",
    "/b.txt",
    "ab/",
    "!x1.py",
    "**/a",
]


@pytest.fixture(params=["python", "native"])
def lister(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "python":
        monkeypatch.setattr(nativelist, "_fastlist", None)
    elif not nativelist.available():
        if os.environ.get("DLM_ALLOW_NO_NATIVE") == "1":
            pytest.skip("DLM_ALLOW_NO_NATIVE=1: this install has no C compiler")
        pytest.fail("dlm.rows._fastlist is not built")
    return request.param


def random_tree(root: Path, rng: random.Random) -> list[str]:
    """Files at depth 0 to 3 with names drawn from `NAMES`; returns their relpaths."""
    rels: set[str] = set()
    for _ in range(rng.randint(4, 14)):
        parts = [rng.choice(NAMES) for _ in range(rng.randint(1, 4))]
        rel = "/".join(parts)
        if any(r.startswith(rel + "/") or rel.startswith(r + "/") for r in rels):
            continue  # a name cannot be a file and a folder at once
        rels.add(rel)
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    return sorted(rels)


def expected(rels: list[str], include: list[str], exclude: list[str]) -> list[str]:
    inc = pathspec.PathSpec.from_lines("gitwildmatch", include)
    exc = pathspec.PathSpec.from_lines("gitwildmatch", exclude)

    def pruned(rel: str) -> bool:
        parts = rel.split("/")[:-1]
        return any(exc.match_file("/".join(parts[: i + 1]) + "/") for i in range(len(parts)))

    return sorted(r for r in rels if inc.match_file(r) and not exc.match_file(r) and not pruned(r))


def walked(root: Path, include: list[str], exclude: list[str]) -> list[str]:
    d = SimpleNamespace(path=str(root), include=include, exclude=exclude, max_bytes_per_file=1_000_000, max_files=None)
    return sorted(f.relpath for f in walk_sources([d], root.parent).files)


def check(tmp_path: Path, seed: int, n_sets: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / f"t{seed}"
    rels = random_tree(root, rng)
    for _ in range(n_sets):
        include = rng.sample(PATTERNS, rng.randint(1, 3))
        exclude = rng.sample(PATTERNS, rng.randint(0, 3))
        assert walked(root, include, exclude) == expected(rels, include, exclude), (rels, include, exclude)


@pytest.mark.parametrize(
    ("include", "exclude"),
    [
        (["**/*"], ["*/"]),
        (["**/"], []),
        (["*/"], []),
        (["**/*"], ["/**/"]),
        (["**/*/"], []),
        (["**/*"], ["**/**/"]),
        (["**/*"], ["*/", "!nothing"]),
    ],
)
def test_folder_patterns_match_as_pathspec_does(tmp_path: Path, lister: str, include, exclude):
    root = tmp_path / "t"
    rels = ["top.py", "pkg/a.py", "pkg/sub/b.py"]
    for rel in rels:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    assert walked(root, include, exclude) == expected(rels, include, exclude)


def test_walk_equals_pathspec_on_random_patterns(tmp_path: Path, lister: str):
    for seed in range(12):
        check(tmp_path, seed, 25)


@pytest.mark.slow
def test_walk_equals_pathspec_fuzz(tmp_path: Path, lister: str):
    for seed in range(100, 400):
        check(tmp_path, seed, 40)

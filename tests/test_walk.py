import os
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlm.errors import SourceError
from dlm.rows import nativelist
from dlm.rows.walk import walk_sources


@pytest.fixture(autouse=True, params=["python", "native"])
def lister(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every walk test runs with the folders listed in Python and by the native extension."""
    if request.param == "python":
        monkeypatch.setattr(nativelist, "_fastlist", None)
    elif not nativelist.available():
        if os.environ.get("DLM_ALLOW_NO_NATIVE") == "1":
            pytest.skip("DLM_ALLOW_NO_NATIVE=1: this install has no C compiler")
        pytest.fail(
            "dlm.rows._fastlist is not built: reinstall with a C compiler (make install), "
            "or set DLM_ALLOW_NO_NATIVE=1 to test the Python walk alone"
        )
    return request.param


def directive(path=".", include=("**/*",), exclude=(), max_bytes=1_000_000, max_files=None):
    return SimpleNamespace(
        path=str(path), include=list(include), exclude=list(exclude), max_bytes_per_file=max_bytes, max_files=max_files
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for rel, text in {
        "b.py": "b",
        "a.py": "a",
        "pkg/z.py": "z",
        "pkg/m.txt": "m",
        "node_modules/dep/index.js": "x",
        ".git/HEAD": "ref",
        "pkg/__pycache__/z.pyc": "c",
    }.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_include_exclude_and_deterministic_order(tree: Path):
    result = walk_sources(
        [directive("proj", include=["**/*.py", "**/*.txt"], exclude=["node_modules/", "**/.git/**", "__pycache__/"])],
        tree.parent,
    )
    assert [f.relpath for f in result.files] == ["a.py", "b.py", "pkg/m.txt", "pkg/z.py"]
    assert result.skipped == Counter()


@pytest.fixture
def listed(tree: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders the walk lists (relative to the tree), in order."""
    seen: list[str] = []
    real_scandir = os.scandir

    def spy(path):
        seen.append(os.path.relpath(path, tree))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", spy)
    if nativelist._fastlist is not None:
        real = nativelist._fastlist

        def decide_dirs(bases, *args):
            seen.extend(os.path.relpath(f, tree) for f in bases)
            return real.decide_dirs(bases, *args)

        monkeypatch.setattr(nativelist, "_fastlist", SimpleNamespace(decide_dirs=decide_dirs))
    return seen


def test_excluded_folder_is_pruned_not_listed(tree: Path, listed: list[str]):
    walk_sources([directive(tree, exclude=["node_modules/"])], tree)
    assert "node_modules" not in listed and "node_modules/dep" not in listed
    assert "pkg" in listed


def test_size_cap_and_max_files(tree: Path):
    (tree / "big.py").write_text("x" * 100)
    result = walk_sources([directive(tree, include=["*.py"], max_bytes=50, max_files=2)], tree)
    assert [f.relpath for f in result.files] == ["a.py", "b.py"]
    assert result.skipped == Counter({"too-large": 1})  # big.py, met before the cap
    assert len(result.notes) == 1 and "max_files (2) reached at pkg/z.py" in result.notes[0]


def test_max_files_stops_the_walk(tree: Path, listed: list[str], lister: str):
    for name in ("c", "d", "e"):
        (tree / name).mkdir()
        (tree / name / "f.py").write_text(name)
    result = walk_sources([directive(tree, include=["**/*.py"], max_files=3)], tree)
    assert [f.relpath for f in result.files] == ["a.py", "b.py", "c/f.py"]
    assert "max_files (3) reached at d/f.py" in result.notes[0]
    if lister == "python":  # folders after the stop are never listed
        assert "e" not in listed and "pkg" not in listed
    else:  # the native lister lists a bounded batch ahead of the walk; nothing past the stop is taken
        assert len(listed) <= nativelist.FIRST_BATCH
    exact = walk_sources([directive(tree, include=["**/*.py"], max_files=6)], tree)
    assert len(exact.files) == 6 and exact.notes == []  # a cap the tree meets exactly is no stop


def test_symlink_escaping_root_skipped_or_refused(tree: Path, tmp_path: Path):
    outside = tmp_path / "secret.txt"
    outside.write_text("password")
    (tree / "link.txt").symlink_to(outside)
    result = walk_sources([directive(tree)], tree)
    assert "link.txt" not in [f.relpath for f in result.files]
    assert result.skipped["escapes-root"] == 1
    assert "outside the source root" in result.notes[0]
    with pytest.raises(SourceError, match="link.txt is a symlink .* outside the source root"):
        walk_sources([directive(tree)], tree, strict=True)


def test_symlink_inside_root_is_followed_once(tree: Path):
    (tree / "alias").symlink_to(tree / "pkg")
    result = walk_sources([directive(tree, include=["**/*.py"])], tree)
    assert [f.relpath for f in result.files] == ["a.py", "alias/z.py", "b.py"]


def test_links_to_files_inside_root_are_taken_in_order_and_capped_like_files(tree: Path):
    (tree / "big.py").write_text("x" * 50)
    (tree / "c.py").symlink_to(tree / "pkg" / "z.py")  # taken under its own path
    (tree / "d.py").symlink_to(tree / "big.py")  # its target's size decides
    (tree / "e.py").symlink_to(tree / "missing.py")  # dangling
    (tree / "f.py").symlink_to(tree / "a.py")  # past max_files
    result = walk_sources([directive(tree, include=["*.py"], max_bytes=10, max_files=3)], tree)
    assert [f.relpath for f in result.files] == ["a.py", "b.py", "c.py"]
    c = result.files[2]
    assert c.path == str(tree / "c.py") and c.size == (tree / "pkg" / "z.py").stat().st_size
    assert result.skipped == Counter({"too-large": 2, "unreadable": 1})
    assert "max_files (3) reached at f.py" in result.notes[0]  # a link past the cap stops the walk too


def test_missing_root_names_directive_and_folder(tmp_path: Path):
    with pytest.raises(SourceError, match=r"training.sources\[0\].path: .*nope does not exist"):
        walk_sources([directive("nope")], tmp_path, doc_name="doc.dlm")


def test_dotdot_pattern_is_refused(tree: Path):
    with pytest.raises(SourceError, match=r"sources\[0\].include\[0\]: pattern '../\*\*' has a '..' segment"):
        walk_sources([directive(tree, include=["../**"])], tree)


def test_stdlib_variable_expands(tmp_path: Path):
    result = walk_sources([directive("$DLM_STDLIB", include=["json/*.py"])], tmp_path)
    assert "json/decoder.py" in [f.relpath for f in result.files]


PATTERN_CASES = [
    (["**/*"], [".git/"]),
    (["**/*"], ["build/", "*.log"]),
    (["*"], ["docs/*/"]),
    (["**"], []),
    (["**/*.py"], ["tests/", "gen/"]),
    (["src/**", "*.md"], ["**/gen/**"]),
    (["**/*"], ["build"]),  # without the slash it matches files named build too
    (["**/*", "!*.log"], ["build/"]),
]


@pytest.mark.parametrize("include, exclude", PATTERN_CASES)
def test_patterns_mean_what_pathspec_says(tmp_path: Path, include: list[str], exclude: list[str]):
    """The walk's joined and simplified matching against pathspec itself, path by path:
    a file is taken when `include` matches it, and neither it nor any folder above it
    (as `folder/`) matches `exclude`."""
    import pathspec

    root = tmp_path / "t"
    for rel in [
        ".git/HEAD",
        "build/out.o",
        "src/a.py",
        "src/build",
        "src/gen/x.py",
        "src/build.py/inner.py",
        "docs/api/index.md",
        "docs/readme.md",
        "app.log",
        "logs/app.log",
        "tests/test_a.py",
        "node_modules/x/index.js",
        "a/b/c/d/e.py",
        "gen",
        "x.log/y.py",
    ]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    inc = pathspec.PathSpec.from_lines("gitwildmatch", include)
    exc = pathspec.PathSpec.from_lines("gitwildmatch", exclude)
    expected = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        rel_folder = os.path.relpath(folder, root)
        parts = [] if rel_folder == "." else rel_folder.split(os.sep)
        if any(exc.match_file("/".join(parts[: i + 1]) + "/") for i in range(len(parts))):
            continue
        expected += [
            "/".join([*parts, f])
            for f in files
            if inc.match_file("/".join([*parts, f])) and not exc.match_file("/".join([*parts, f]))
        ]
    got = walk_sources([directive(root, include=include, exclude=exclude)], tmp_path).files
    assert sorted(f.relpath for f in got) == sorted(expected)


def test_a_small_file_under_a_huge_cap_reads_its_own_size(tmp_path: Path):
    """The read buffer is sized by the file, not by `max_bytes_per_file`."""
    from dlm.rows.read import read_file_text
    from dlm.rows.types import FileRow

    small = tmp_path / "six.py"
    small.write_text("x = 1\n")
    row = FileRow(0, str(small), "six.py", 6, 0, 0, 0, 1 << 62)
    got = read_file_text(row, 1 << 62)
    assert not isinstance(got, str) and got.text == "x = 1\n"
    assert read_file_text(row, 5) == "too-large"


def test_a_file_that_reports_size_0_is_read_to_its_end_or_the_cap(monkeypatch: pytest.MonkeyPatch):
    """/proc files report size 0 and have content: read in chunks up to the cap."""
    from dlm.rows import read

    proc = Path("/proc/self/cmdline")
    if not proc.exists() or proc.stat().st_size != 0:
        pytest.skip("no /proc file that reports size 0 here")
    whole = proc.read_bytes()
    monkeypatch.setattr(read, "READ_CHUNK", 3)
    with open(proc, "rb") as fh:
        assert read._read_capped(fh, 1 << 20) == whole
    with open(proc, "rb") as fh:
        assert read._read_capped(fh, 4) == whole[:5]


@pytest.mark.parametrize("change", ["removed", "replaced"])
def test_a_link_changed_while_it_is_resolved_is_one_unreadable_skip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
):
    """The link is removed, or replaced by a regular file, between the lstat that found
    it and the readlink that resolves it (here at exactly that moment, as a script
    rewriting links hits it by chance): the walk counts it and goes on."""
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.py").write_text("a")
    (root / "z.py").write_text("z")
    link = root / "link.py"
    link.symlink_to(root / "a.py")
    real_readlink = os.readlink

    def racing_readlink(path, *args, **kw):
        if os.fspath(path) == str(link) and link.is_symlink():
            link.unlink()
            if change == "replaced":
                link.write_text("now a file")
        return real_readlink(path, *args, **kw)

    monkeypatch.setattr(os, "readlink", racing_readlink)
    result = walk_sources([directive(root)], tmp_path)
    assert [f.relpath for f in result.files] == ["a.py", "z.py"]
    assert result.skipped == Counter({"unreadable": 1})

"""The native folder listing gives the walk exactly what the Python listing gives."""

import errno
import os
import random
import sysconfig
from pathlib import Path
from types import SimpleNamespace

import pytest

from dlm.rows import nativelist
from dlm.rows.listing import DIR, ROW, ROWS, ListRules, list_folder
from dlm.rows.types import FileRow
from dlm.rows.walk import walk_sources

pytestmark = pytest.mark.skipif(
    not nativelist.available() and os.environ.get("DLM_ALLOW_NO_NATIVE") == "1",
    reason="DLM_ALLOW_NO_NATIVE=1: this install has no C compiler",
)


@pytest.fixture(autouse=True)
def built() -> None:
    assert nativelist.available(), (
        "dlm.rows._fastlist is not built: reinstall with a C compiler (make install), "
        "or set DLM_ALLOW_NO_NATIVE=1 to test the Python walk alone"
    )


def directive(path, include=("**/*",), exclude=(), max_bytes=1_000_000, max_files=None):
    return SimpleNamespace(
        path=str(path), include=list(include), exclude=list(exclude), max_bytes_per_file=max_bytes, max_files=max_files
    )


def both_ways(monkeypatch: pytest.MonkeyPatch, directives, base: Path):
    """The walk's (files, skips, notes) with the native lister, then with the Python one."""
    native = walk_sources(directives, base)
    with monkeypatch.context() as m:
        m.setattr(nativelist, "_fastlist", None)
        python = walk_sources(directives, base)
    return ([tuple(f) for f in native.files], dict(native.skipped), native.notes), (
        [tuple(f) for f in python.files],
        dict(python.skipped),
        python.notes,
    )


@pytest.fixture
def odd_tree(tmp_path: Path) -> Path:
    """Every kind of entry the walk decides: sizes at the cap, a FIFO, links to files and
    folders inside the root (one folder reached twice), a link out of the root, a dangling
    link, an excluded folder, names that sort differently by bytes and by str, an
    undecodable name, empty and deep folders, and a folder of 300 entries."""
    root = tmp_path / "root"
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "sub" / "deep.py").write_text("d")
    (root / "a.py").write_text("a")
    (root / "at_cap.txt").write_bytes(b"x" * 64)
    (root / "over_cap.txt").write_bytes(b"x" * 65)
    os.mkfifo(root / "pipe.py")
    (root / "Zeta.py").write_text("upper sorts first")
    (root / "é.py").write_text("e-acute")
    (root / "\U0001f600.py").write_text("emoji")
    (root / os.fsdecode(b"bad\xff.py")).write_text("undecodable")
    (root / os.fsdecode(b"bad\xc3.py")).write_text("undecodable too")
    (root / "bad\U0001f600.py").write_text("before bad\\xff by bytes, after it as str")
    (root / "empty").mkdir()
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "node_modules" / "dep" / "x.js").write_text("x")
    (root / "link_to_a.py").symlink_to(root / "a.py")
    (root / "b_link_to_pkg").symlink_to(root / "pkg")  # sorts before pkg: pkg is walked through it
    (root / "dangling.py").symlink_to(root / "missing.py")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    (root / "escape.txt").symlink_to(outside)
    wide = root / "wide"
    wide.mkdir()
    for i in random.Random(0).sample(range(1000), 300):
        (wide / f"f{i:03d}.txt").write_text(str(i))
    deep = root
    for i in range(40):
        deep = deep / f"d{i}"
    deep.mkdir(parents=True)
    (deep / "bottom.py").write_text("b")
    return root


def test_odd_tree_same_as_python(odd_tree: Path, monkeypatch: pytest.MonkeyPatch):
    directives = [
        directive(odd_tree, exclude=["node_modules/"], max_bytes=64),
        directive(odd_tree, include=["**/*.py"], exclude=["wide/"]),
    ]
    native, python = both_ways(monkeypatch, directives, odd_tree)
    assert native == python
    files, skipped, notes = native
    rels = [f[2] for f in files]
    assert "pkg/sub/deep.py" not in rels and "b_link_to_pkg/sub/deep.py" in rels  # walked once, first path
    assert (
        skipped["too-large"] == 1 and skipped["not-a-file"] == 2 and skipped["escapes-root"] == 1
    )  # escape.txt, under the first
    assert skipped["unreadable"] == 2  # the dangling link, under both directives
    assert "node_modules/dep/x.js" not in rels and len(notes) == 1


def test_stdlib_same_as_python(monkeypatch: pytest.MonkeyPatch):
    stdlib = sysconfig.get_paths()["stdlib"]
    directives = [
        directive(stdlib, include=["**/*.py"], exclude=["site-packages/", "__pycache__/"]),
        directive(stdlib, include=["**/*"], exclude=["site-packages/"], max_bytes=20_000),
    ]
    native, python = both_ways(monkeypatch, directives, Path(stdlib))
    assert native == python and len(native[0]) > 1000


@pytest.mark.parametrize("cap", [1, 7, 250, 1001])
def test_max_files_stops_at_the_same_file(cap: int, monkeypatch: pytest.MonkeyPatch):
    stdlib = sysconfig.get_paths()["stdlib"]
    directives = [directive(stdlib, include=["**/*.py"], exclude=["site-packages/"], max_files=cap)]
    native, python = both_ways(monkeypatch, directives, Path(stdlib))
    assert native == python and len(native[0]) == cap and "reached at" in native[2][0]


def decided(folders, rules, threads=2):
    """Each folder's listing from the extension with its runs of files expanded to ROW
    items (as `list_folder` gives them), and the subfolders it names; or the errno."""
    bases = [os.path.join(f, "") for f in folders]
    prefixes = ["" if f == folders[0] else os.path.relpath(f, folders[0]) + "/" for f in folders]
    got = nativelist._fastlist.decide_dirs(
        bases,
        prefixes,
        threads,
        rules.take_file,
        rules.take_folder,
        rules.source_index,
        rules.max_bytes,
        FileRow,
        nativelist.odd_entry(rules),
        lambda item: item[1],
    )
    out = []
    for base, listing in zip(bases, got, strict=True):
        if isinstance(listing, int):
            out.append(listing)
            continue
        items, subfolders = listing
        expanded = []
        for item in items:
            if item[0] == ROWS:
                assert item[3] and all(type(row) is FileRow for row in item[3])
                expanded += [(ROW, row.path[len(base) :], row.path, row) for row in item[3]]
            else:
                expanded.append(item)
        assert subfolders == [(path, prefix_of(base, folders[0], name)) for kind, name, path, _ in items if kind == DIR]
        out.append(expanded)
    return prefixes, out


def prefix_of(base: str, root: str, name: str) -> str:
    rel = os.path.relpath(base + name, root)
    return rel + "/"


def test_each_folder_decided_like_list_folder(odd_tree: Path):
    rules = ListRules(lambda rel: not rel.endswith(".txt"), lambda rel: rel != "empty/", 3, 64)
    folders = [str(odd_tree), str(odd_tree / "wide"), str(odd_tree / "pkg")]
    prefixes, got = decided(folders, rules)
    for folder, prefix, items in zip(folders, prefixes, got, strict=True):
        assert items == list_folder(folder, prefix, rules)


def test_folders_that_cannot_be_listed_give_their_errno(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    rules = ListRules(bool, bool, 0, 1)
    _, got = decided([str(tmp_path), str(tmp_path / "missing"), str(tmp_path / "file")], rules, threads=4)
    assert got[0][0][:3] == (ROW, "file", str(tmp_path / "file")) and got[1:] == [errno.ENOENT, errno.ENOTDIR]
    assert decided([], rules)[1] == []


def test_errors_in_the_match_functions_propagate(odd_tree: Path):
    def broken(rel):
        raise ValueError(f"cannot match {rel}")

    with pytest.raises(ValueError, match="cannot match"):
        decided([str(odd_tree)], ListRules(broken, bool, 0, 64))
    with pytest.raises(TypeError, match="tuple subclass"):
        nativelist._fastlist.decide_dirs([], [], 1, bool, bool, 0, 1, dict, None, None)


@pytest.fixture
def looping_links(tmp_path: Path) -> Path:
    """Links whose target cannot be stat-ed (ELOOP): one looping inside the root, one
    leaving the root into a loop, beside a plain file."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a.py").write_text("a")
    (root / "loop.py").symlink_to(root / "loop.py")
    outside = tmp_path / "out"
    outside.mkdir()
    (outside / "spin.py").symlink_to(outside / "spin.py")
    (root / "esc.py").symlink_to(outside / "spin.py")
    return root


@pytest.mark.parametrize("strict", [False, True])
def test_links_that_cannot_be_stat_ed_are_decided_alike(
    looping_links: Path, monkeypatch: pytest.MonkeyPatch, strict: bool
):
    """Excluded: never counted or refused, by either lister. Included: the same skips
    (the escaping one refused with --strict) by both."""
    from dlm.errors import SourceError

    excluded = [directive(looping_links, exclude=["loop.py", "esc.py"])]
    native = walk_sources(excluded, looping_links, strict=strict)
    with monkeypatch.context() as m:
        m.setattr(nativelist, "_fastlist", None)
        python = walk_sources(excluded, looping_links, strict=strict)
    for got in (native, python):
        assert [f.relpath for f in got.files] == ["a.py"] and not got.skipped

    included = [directive(looping_links)]
    if strict:
        with pytest.raises(SourceError, match="esc.py"):
            walk_sources(included, looping_links, strict=True)
        with monkeypatch.context() as m, pytest.raises(SourceError, match="esc.py"):
            m.setattr(nativelist, "_fastlist", None)
            walk_sources(included, looping_links, strict=True)
        return
    native, python = both_ways(monkeypatch, included, looping_links)
    assert native == python
    assert native[1] == {"escapes-root": 1, "unreadable": 1}


def _decide(folder: Path, odd, row_type=FileRow):
    from dlm.rows import _fastlist

    return _fastlist.decide_dirs(
        [str(folder) + "/"], [""], 1, None, lambda rel: True, 0, 100, row_type, odd, lambda item: item[1]
    )


@pytest.mark.parametrize("bad", ["a list", "kind not an int", "kind ROW", "three items", "name not a str"])
def test_a_bad_odd_result_is_a_type_error_not_a_crash(tmp_path: Path, bad: str):
    """Run in a child process: before the check, a list crashed the interpreter."""
    import subprocess
    import sys

    (tmp_path / "a.py").write_text("a")
    (tmp_path / "link.py").symlink_to(tmp_path / "a.py")
    result = {
        "a list": "[4, name, base + name, None]",
        "kind not an int": "('4', name, base + name, None)",
        "kind ROW": "(0, name, base + name, None)",
        "three items": "(4, name, base + name)",
        "name not a str": "(4, 7, base + name, None)",
    }[bad]
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from pathlib import Path\nfrom test_nativelist import _decide\n"
        f"try:\n    _decide(Path({str(tmp_path)!r}), lambda name, t, e, base, p: {result})\n"
        "except TypeError as exc:\n    print('TypeError', exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("TypeError"), (done.returncode, done.stdout, done.stderr)


@pytest.mark.parametrize("row_type", ["not a type", list, dict])
def test_the_row_type_must_be_a_tuple_type(tmp_path: Path, row_type):
    (tmp_path / "a.py").write_text("a")
    with pytest.raises(TypeError):
        _decide(tmp_path, lambda *a: None, row_type)


def test_rows_are_file_rows_equal_to_python_ones(tmp_path: Path):
    """Built through tuple.__new__: the NamedTuple's type, fields, equality and hash."""
    (tmp_path / "a.py").write_text("a")
    ((items, subs),) = _decide(tmp_path, lambda *a: None)
    ((kind, _, _, rows),) = items
    row = rows[0]
    st = (tmp_path / "a.py").stat()
    want = FileRow(0, str(tmp_path / "a.py"), "a.py", 1, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, 100)
    assert kind == ROWS and subs == [] and type(row) is FileRow
    assert row == want and hash(row) == hash(want) == hash(tuple(want)) and row.relpath == "a.py"

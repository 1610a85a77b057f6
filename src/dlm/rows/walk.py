"""Walk `training.sources` directives into `FileRow`s, reading no file content.

Rules (docs/format.md states them for users):

- A directive's `path` is resolved against the document's folder after `~` and
  `$VAR` expansion; `$DLM_STDLIB` names the running interpreter's standard library.
  That folder is the directive's *root*; it must exist and be a directory.
- `include` / `exclude` are gitignore-style patterns (`pathspec` gitwildmatch: `**`
  spans folders, a trailing `/` matches folders, a pattern without `/` matches at any
  depth) over POSIX paths relative to the root. A pattern with a `..` segment is
  refused: patterns select inside the root, never outside.
- Excluded folders are pruned during the walk (never listed), so excluding
  `**/.git/**` or `node_modules/` costs nothing however large they are.
- Order is deterministic: entries are visited in sorted name order, depth first
  (an explicit stack, so any depth works), so the same tree gives the same rows on
  every machine.
- A symlink whose target resolves outside the root is skipped (`escapes-root`), or
  refused with `strict=True`; include/exclude are applied first, so an excluded link
  is never followed, counted or refused. Symlinks inside the root are followed; a folder
  reachable by several paths is walked once, at the first path in walk order.
- Files over `max_bytes_per_file` are skipped (`too-large`) by their stat size, and
  again by the bytes actually read (a file may grow after the walk).
- `max_files` stops the directive's walk at the first file past the cap: the rest of
  the tree is not walked (a cap exists to bound the work on a huge tree; folders are
  listed at most a bounded lookahead beyond the stop), so files after it are not
  counted; a note names the file the walk stopped at.
  Binary and undecodable files are decided later, when content is read
  (`dlm.rows.read`).
"""

from __future__ import annotations

import gc
import os
import re
import sysconfig
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pathspec
from pathspec import RegexPattern

from dlm.errors import SourceError
from dlm.rows import nativelist
from dlm.rows.listing import DIR, LINK_FILE, ROW, ROWS, SKIP, Item, ListRules, Prefetcher, file_item, take_all
from dlm.rows.nativelist import NativeLister
from dlm.rows.types import FileRow


@dataclass
class WalkResult:
    """Files taken from all directives, in order, and what was skipped.

    Attributes:
        files: taken files, directive by directive, each in deterministic order.
        skipped: reason -> count (`excluded` is not counted: exclusion is the point).
        notes: one line per notable skip (escaping symlinks), for the report; the run
            adds its other notes about the rows (`dlm.doc.checks`, files synth cannot parse).
    """

    files: list[FileRow] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


def format_skips(counts: dict[str, int]) -> str:
    """`"2 binary, 11 too-large"` (reasons sorted), or `"none"`: how messages name skips."""
    return ", ".join(f"{n} {why}" for why, n in sorted(counts.items())) or "none"


def expand_source_path(raw: str, base_dir: Path) -> Path:
    """Resolve a directive `path` (see module rules) to an absolute folder path."""
    env = dict(os.environ)
    env.setdefault("DLM_STDLIB", sysconfig.get_paths()["stdlib"])
    expanded = os.path.expanduser(_expandvars(raw, env))
    path = Path(expanded)
    if not path.is_absolute():
        path = base_dir / path
    return Path(os.path.abspath(path))


_VAR = re.compile(r"\$(\w+)|\$\{(\w+)\}")


def _expandvars(raw: str, env: dict[str, str]) -> str:
    """`$VAR` / `${VAR}` from `env`; unknown variables stay as written (like os.path.expandvars)."""
    return _VAR.sub(lambda m: env.get(m.group(1) or m.group(2), m.group(0)), raw)


class _Matcher:
    """Gitignore-style matching of POSIX relative paths against a pattern list.

    `pathspec` compiles each pattern to a regex; without negations (`!pattern`) a path
    matches when any pattern does, so the regexes are joined into one and matched in a
    single call (pathspec's per-pattern loop is most of a 50K-file walk otherwise).
    With negations, gitignore's last-match-wins order needs pathspec itself.

    Without negations two facts of pathspec's compiled regexes are kept for files:
    `universal` (a pattern such as `*`, `**` or `**/*` compiles to `.`, any non-empty
    path), and `file_regex`, the join of the patterns that can match a file's own name:
    a folder-only pattern (`build/`) compiles to a regex that needs a `/` after the
    matched name, so it matches a file only through one of the file's folders, and
    the walk has already tested every folder above a file against the same pattern.
    """

    def __init__(self, patterns: Sequence[str]) -> None:
        self.spec = pathspec.PathSpec.from_lines("gitwildmatch", patterns)
        # gitwildmatch patterns are all RegexPatterns; the isinstance narrows for the checker
        compiled = [
            (p.include, p.regex)
            for p in self.spec.patterns
            if isinstance(p, RegexPattern) and p.include is not None and p.regex is not None
        ]
        self.regex: re.Pattern[str] | None = None
        self.file_regex: re.Pattern[str] | None = None
        self.universal = False
        self.match: Callable[[str], bool]
        if all(include for include, _ in compiled):
            self.regex = _join([regex for _, regex in compiled])
            self.file_regex = _join([regex for _, regex in compiled if not regex.pattern.endswith(_FOLDER_ONLY)])
            self.universal = any(regex.pattern == "." for _, regex in compiled)
            self.match = self._match_regex if self.regex else self._match_none
        else:
            self.match = self.spec.match_file

    def _match_regex(self, rel: str) -> bool:
        return self.regex.match(rel) is not None  # type: ignore[union-attr]  # bound only when regex is set

    @staticmethod
    def _match_none(rel: str) -> bool:
        return False


_FOLDER_ONLY = "(?P<ps_d>/)"  # how pathspec ends the regex of a pattern with a trailing `/`


def _join(regexes: Sequence[re.Pattern[str]]) -> re.Pattern[str] | None:
    """One regex that `re.match` finds where pathspec's `search` finds any of `regexes`
    (None: no pattern). Most of pathspec's regexes start with `^`; the few that do not
    (`*`, `**` compile to `.`; `*/`, `**/`, `/**/`, `**/*/` to a bare `/`) are searched
    anywhere in the path, so they are prefixed with a lazy any-character run. The named
    group only tells pathspec a folder matched; plain grouping means the same."""
    joined = "|".join(
        f"(?:{regex.pattern})" if regex.pattern.startswith("^") else rf"(?:[\s\S]*?(?:{regex.pattern}))"
        for regex in regexes
    )
    return re.compile(joined.replace("(?P<ps_d>", "(?:")) if joined else None


def _matcher(patterns: Sequence[str], where: str) -> _Matcher:
    for i, pattern in enumerate(patterns):
        if ".." in pattern.replace("\\", "/").split("/"):
            raise SourceError(
                f"{where}[{i}]: pattern {pattern!r} has a '..' segment; patterns select inside the "
                f"source root, so point `path` at the folder you want instead"
            )
        try:
            _Matcher([pattern])
        except (ValueError, re.error) as exc:  # pathspec's pattern error subclasses ValueError
            raise SourceError(
                f"{where}[{i}]: pattern {pattern!r} is not a valid gitignore-style pattern ({exc}); "
                "fix or remove it (escape a literal '[', '!' or '\\' with a backslash)"
            ) from None
    return _Matcher(patterns)


def walk_sources(
    directives: Sequence[Any], base_dir: Path, *, strict: bool = False, doc_name: str = "<doc>"
) -> WalkResult:
    """Walk every directive (objects with `path`, `include`, `exclude`,
    `max_bytes_per_file`, `max_files`) relative to `base_dir`.

    Raises:
        SourceError: a root that does not exist or is not a folder, a pattern with
            `..`, or (with `strict`) a symlink escaping its root.
    """
    result = WalkResult()
    with _gc_paused():
        for index, directive in enumerate(directives):
            _walk_directive(index, directive, base_dir, strict, doc_name, result)
    return result


@contextmanager
def _gc_paused() -> Iterator[None]:
    """The walk creates one tuple per file and no reference cycles; the cyclic collector
    would still rescan every live object of the process many times over, a cost that
    grows with everything else the process holds (a loaded model)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def directive_root(directive: Any, base_dir: Path, where: str) -> tuple[Path, _Matcher, _Matcher]:
    """(root folder, include matcher, exclude matcher) of one directive, checked;
    `where` names it in messages (`doc.dlm: training.sources[0]`). Reads no folder.

    Raises:
        SourceError: the root does not exist or is not a folder; a pattern is invalid
            or has a `..` segment.
    """
    root = expand_source_path(directive.path, base_dir)
    if not root.exists():
        raise SourceError(
            f"{where}.path: {root} does not exist; fix the path (relative paths resolve "
            f"against the document's folder {base_dir})"
        )
    if not root.is_dir():
        raise SourceError(f"{where}.path: {root} is not a folder; point it at a directory")
    return root, _matcher(directive.include, f"{where}.include"), _matcher(directive.exclude, f"{where}.exclude")


def _walk_directive(
    index: int, directive: Any, base_dir: Path, strict: bool, doc_name: str, result: WalkResult
) -> None:
    where = f"{doc_name}: training.sources[{index}]"
    root, include, exclude = directive_root(directive, base_dir, where)
    walker = _DirectiveWalker(
        index=index,
        root=root,
        include=include,
        exclude=exclude,
        max_bytes=directive.max_bytes_per_file,
        max_files=directive.max_files,
        strict=strict,
        where=where,
        result=result,
    )
    walker.run()


@dataclass
class _DirectiveWalker:
    index: int
    root: Path
    include: _Matcher
    exclude: _Matcher
    max_bytes: int
    max_files: int | None
    strict: bool
    where: str
    result: WalkResult
    taken: int = 0
    stopped: bool = False  # max_files reached: nothing more is taken or entered
    seen_dirs: set[tuple[int, int]] = field(default_factory=set)

    def run(self) -> None:
        real_root = os.path.realpath(self.root)
        self.real_root_prefix = real_root.rstrip(os.sep) + os.sep
        st = os.stat(real_root)
        self.seen_dirs.add((st.st_dev, st.st_ino))
        self.rules = ListRules(
            take_file=_take_file(self.include, self.exclude),
            take_folder=_take_folder(self.exclude),
            source_index=self.index,
            max_bytes=self.max_bytes,
        )
        self.lister: Prefetcher | NativeLister = (
            NativeLister(self.rules) if nativelist.available() else Prefetcher(self.rules)
        )
        try:
            self._walk(str(self.root), "")
        finally:
            self.lister.close()

    def _inside(self, real: str) -> bool:
        return real.startswith(self.real_root_prefix) or real + os.sep == self.real_root_prefix

    def _escape(self, rel: str, real: str) -> None:
        msg = f"{self.where}: {rel} is a symlink to {real}, outside the source root {self.root}"
        if self.strict:
            raise SourceError(msg + "; remove the link or drop --strict to skip it")
        self.result.skipped["escapes-root"] += 1
        self.result.notes.append(msg + "; skipped")

    def _walk(self, folder: str, rel_prefix: str) -> None:
        """Depth first in sorted name order, with an explicit stack (a tree thousands of
        folders deep must not hit Python's recursion limit). Folders this walk enters
        next may be listed by worker threads meanwhile (`dlm.rows.listing`); every
        decision that needs more than one folder stays on this thread, so the result
        equals an in-line walk."""
        stack: list[tuple[Iterator[Item], str]] = []
        opened = self._list(folder, rel_prefix)
        if opened is None:
            return
        stack.append((opened, rel_prefix))
        while stack:
            entries, prefix = stack[-1]
            child = self._files_until_folder(entries, prefix)
            if self.stopped:
                return
            if child is None:
                stack.pop()
                continue
            path, rel = child
            listed = self._list(path, rel + "/")
            if listed is not None:
                stack.append((listed, rel + "/"))

    def _list(self, folder: str, rel_prefix: str) -> Iterator[Item] | None:
        listing = self.lister.get(folder, rel_prefix)
        if listing is None:
            self.result.skipped["unreadable"] += 1
            return None
        if self.lister.pool is not None:
            for kind, name, path, _ in listing:
                if kind == DIR:
                    self.lister.ahead(path, rel_prefix + name + "/")
        return iter(listing)

    def _files_until_folder(self, entries: Iterator[Item], rel_prefix: str) -> tuple[str, str] | None:
        """Take files from `entries` until a folder to enter (returned as `(path, rel)`)
        or the end (None). Files come in order, so `max_files` counts in walk order."""
        # the hot loop of a large walk: locals, and the common kind first
        skipped, files, max_files = self.result.skipped, self.result.files, self.max_files
        for item in entries:
            kind = item[0]
            if kind == ROW:
                if max_files is not None and self.taken >= max_files:
                    self._stop(rel_prefix + item[1])
                    return None
                self.taken += 1
                files.append(item[3])
                continue
            if kind == ROWS:  # a run of files (the native lister)
                rows = item[3]
                if max_files is not None and self.taken + len(rows) > max_files:
                    keep = max_files - self.taken
                    files.extend(rows[:keep])
                    self.taken = max_files
                    self._stop(rows[keep].relpath)
                    return None
                self.taken += len(rows)
                files.extend(rows)
                continue
            if kind == SKIP:
                skipped[item[3]] += 1
                continue
            _, name, path, seen_key = item
            rel = rel_prefix + name
            if kind != DIR:  # a link (already matched by the patterns): never followed out of the root
                try:  # removed or replaced since it was listed: readlink fails (ENOENT, EINVAL)
                    real = os.path.realpath(path)
                except OSError:
                    skipped["unreadable"] += 1
                    continue
                if not self._inside(real):
                    self._escape(rel, real)
                    continue
                try:
                    st = os.stat(path)  # the target's stat
                except OSError:
                    skipped["unreadable"] += 1
                    continue
                if kind == LINK_FILE:
                    self._take_link(file_item(self.rules, name, path, rel, st), rel)
                    if self.stopped:
                        return None
                    continue
                seen_key = (st.st_dev, st.st_ino)
            if self._first_visit(seen_key):
                return path, rel
        return None

    def _take_link(self, item: Item, rel: str) -> None:
        """A link to a file inside the root: taken, or skipped, like the files around it."""
        if item[0] == SKIP:
            self.result.skipped[item[3]] += 1
        elif self.max_files is not None and self.taken >= self.max_files:
            self._stop(rel)
        else:
            self.taken += 1
            self.result.files.append(item[3])

    def _stop(self, rel: str) -> None:
        self.stopped = True
        self.result.notes.append(
            f"{self.where}: max_files ({self.max_files}) reached at {rel}; the walk of this entry "
            "stopped there (raise max_files to take more)"
        )

    def _first_visit(self, key: tuple[int, int]) -> bool:
        """`key`: the folder's (st_dev, st_ino)."""
        if key in self.seen_dirs:  # reached again through a link
            return False
        self.seen_dirs.add(key)
        return True


def _take_file(include: _Matcher, exclude: _Matcher) -> Callable[[str], object]:
    """One call per file, truthy when included and not excluded. Without negations both
    sides are one regex each, and a negative lookahead joins them into one `re` match
    (the match object or None: the walk tests truth, and a wrapper frame per file costs).
    A universal include and folder-only excludes need no match at all (`_Matcher`):
    `take_all`."""
    if include.regex is not None and (exclude.regex is not None or exclude.match is exclude._match_none):
        inc = None if include.universal else include.regex.pattern
        exc = exclude.file_regex.pattern if exclude.file_regex is not None else None
        if inc is None and exc is None:
            return take_all
        if exc is None:
            return include.regex.match
        return re.compile(f"(?!(?:{exc}))(?:{inc or '.'})").match
    inc_match, exc_match = include.match, exclude.match
    return lambda rel: inc_match(rel) and not exc_match(rel)


def _take_folder(exclude: _Matcher) -> Callable[[str], bool]:
    exc = exclude.match
    return lambda rel: not exc(rel)

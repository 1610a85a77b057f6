"""Source walk: folders listed by the native extension (the default where it is built),
and in Python: in line, by the Python default (in line until listings prove slow), and
always by worker threads ahead of the walk.

    .venv/bin/python benchmarks/walk.py [--tree DIR] [--repeats 5]
    .venv/bin/python benchmarks/walk.py --commands [--tree DIR] [--repeats 9]
    .venv/bin/python benchmarks/walk.py --cold [--tree DIR] [--repeats 3]     # as root

Without a mode: walks the standard library and, with `--tree`, a large tree (every
file under 1 MB, `.git/` excluded) in one process, rotating the ways, checks they give
the same files and skips, and prints the median seconds of each and the ratios,
beside the floor of any walk that checks every file: `os.stat` of the taken files
alone, in a loop. The trees are in the kernel's caches after the first walk, so this
is the warm case; other processes on the machine disturb absolute numbers.

`--commands`: whole commands a user runs, each in a fresh process (start, imports,
document, walk, output), with the native lister, the Python default and Python in
line, the ways rotated between repeats: `dlm show` and a warm `dlm cache build` (every
row cached; the cache is built once first, untimed) of a document over the standard
library (`**/*.py`, as `examples/stdlib.dlm`), and with `--tree`, `dlm show` of a
document over that tree (every file under 32 KiB, `__pycache__/` excluded). Prints
the median wall seconds of each way and their ratios to Python in line.

`--cold`: `dlm show` over a tree that is not in any cache: the `--tree` document, or
without `--tree` the standard library document. The tree is copied once into an ext4
image under `--image-dir` with the same names, sizes, modes, times and links, its files
sparse (the walk reads no content); each run attaches the image with direct I/O (so the host's page cache holding
the image file is bypassed), mounts it read-only, runs the command in a fresh process,
and unmounts (which drops the tree's dentries and inodes). Needs root, `mkfs.ext4`,
`losetup` and `mount`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import dlm.rows.listing as listing
import dlm.rows.nativelist as nativelist
from dlm.rows.walk import walk_sources


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tree", type=Path, help="a large tree (a Linux source tree, a site-packages folder)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--commands", action="store_true", help="time whole dlm commands per way")
    parser.add_argument("--cold", action="store_true", help="time dlm show on a tree out of every cache (root)")
    parser.add_argument("--image-dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    if args.commands:
        commands(args.tree, args.repeats)
        return
    if args.cold:
        cold(args.tree, args.image_dir, args.repeats)
        return
    walks(args.tree, args.repeats)


def walks(tree: Path | None, repeats: int) -> None:
    corpora = [
        (
            "stdlib",
            SimpleNamespace(
                path=sysconfig.get_paths()["stdlib"],
                include=["**/*.py"],
                exclude=["site-packages/", "__pycache__/"],
                max_bytes_per_file=1_000_000,
                max_files=None,
            ),
        )
    ]
    if tree:
        corpora.append(
            (
                tree.name,
                SimpleNamespace(
                    path=str(tree),
                    include=["**/*"],
                    exclude=[".git/"],
                    max_bytes_per_file=1_000_000,
                    max_files=None,
                ),
            )
        )
    if not nativelist.available():
        raise SystemExit("dlm.rows._fastlist is not built: make install (needs a C compiler)")
    native = nativelist._fastlist
    threads, slow, probe = listing.THREADS, listing.WAIT_RATIO, listing.PROBE_ENTRIES
    ways = {
        "native": (native, threads, slow, probe),
        "in line": (None, 0, slow, probe),
        "default": (None, threads, slow, probe),
        "threads": (None, threads, 0.0, 0),
    }
    print(
        f"| corpus | files | native s | in line s | Python default s | {threads} threads always s "
        f"| native / in line | threads / in line | os.stat of the files alone s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, c in corpora:
        times: dict[str, list[float]] = {way: [] for way in ways}
        results = {}
        for _ in range(repeats):
            for way, (nativelist._fastlist, listing.THREADS, listing.WAIT_RATIO, listing.PROBE_ENTRIES) in ways.items():
                start = time.perf_counter()
                w = walk_sources([c], Path("."))
                times[way].append(time.perf_counter() - start)
                results[way] = ([tuple(f) for f in w.files], dict(w.skipped), w.notes)
            paths = [f[1] for f in results["in line"][0]]
            start = time.perf_counter()
            list(map(os.stat, paths))
            times.setdefault("stat", []).append(time.perf_counter() - start)
        assert results["native"] == results["in line"] == results["default"] == results["threads"]
        med = {way: statistics.median(t) for way, t in times.items()}
        print(
            f"| {name} | {len(results['in line'][0]):,} | {med['native']:.3f} | {med['in line']:.3f} "
            f"| {med['default']:.3f} | {med['threads']:.3f} | {med['native'] / med['in line']:.2f}x "
            f"| {med['threads'] / med['in line']:.2f}x | {med['stat']:.3f} |"
        )
    nativelist._fastlist = native
    listing.THREADS, listing.WAIT_RATIO, listing.PROBE_ENTRIES = threads, slow, probe


RUN = """
import sys
way = sys.argv[1]
import dlm.rows.listing as listing, dlm.rows.nativelist as nativelist
if way != "native":
    nativelist._fastlist = None
if way == "Python in line":
    listing.THREADS = 0
from dlm.cli.main import app
app(sys.argv[2:])
"""
WAYS = ("native", "Python default", "Python in line")

DOC = """---
dlm_id: 01JDWA1KBENCH0000000000{suffix}
dlm_version: 1
base_model: smollm2-135m
training:
  sources:
    - path: {root}
      include: [{include}]
      exclude: [{exclude}]
      max_bytes_per_file: {cap}
---

A document over {root}.
"""


def write_doc(folder: Path, suffix: str, root: str, include: str, exclude: str, cap: int) -> Path:
    doc = folder / f"walk-{suffix}.dlm"
    doc.write_text(DOC.format(suffix=suffix, root=root, include=include, exclude=exclude, cap=cap))
    return doc


def stdlib_doc(folder: Path, root: str = "$DLM_STDLIB") -> Path:
    return write_doc(folder, "AAA", root, '"**/*.py"', '"site-packages/", "__pycache__/"', 200_000)


def tree_doc(folder: Path, root: Path) -> Path:
    return write_doc(folder, "BBB", str(root), '"**/*"', '"__pycache__/"', 32_768)


def timed(way: str, argv: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one `dlm` command in a fresh process, listing folders `way`."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", RUN, way, *argv], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"dlm {' '.join(argv)} ({way}) failed:\n{proc.stderr[-2000:]}")
    return seconds


def print_rows(name: str, times: dict[str, list[float]]) -> None:
    med = {way: statistics.median(t) for way, t in times.items()}
    inline = med["Python in line"]
    print(
        f"| {name} | {len(times['native'])} | {med['native']:.3f} | {med['Python default']:.3f} | {inline:.3f} "
        f"| {med['native'] / inline:.2f}x | {med['Python default'] / inline:.2f}x |",
        flush=True,
    )


HEADER = (
    "| command | repeats | native s | Python default s | Python in line s | native / in line | default / in line |\n"
    "|---|---|---|---|---|---|---|"
)


def commands(tree: Path | None, repeats: int) -> None:
    """Whole commands per way (module docstring)."""
    home = Path(tempfile.mkdtemp(prefix="dlm-walk-bench-"))
    env = dict(os.environ, DLM_HOME=str(home), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    stdlib = stdlib_doc(home)
    cases = [
        ("dlm show (stdlib)", ["show", str(stdlib)]),
        ("dlm cache build, warm (stdlib)", ["cache", "build", str(stdlib)]),
    ]
    if tree:
        cases.append((f"dlm show ({tree.name})", ["show", str(tree_doc(home, tree))]))
    timed("native", ["cache", "build", str(stdlib)], env)  # fills the cache: the timed builds are warm
    print(f"load average before: {os.getloadavg()[0]:.1f}\n{HEADER}", flush=True)
    for name, argv in cases:
        times: dict[str, list[float]] = {way: [] for way in WAYS}
        for r in range(repeats):
            for way in WAYS[r % 3 :] + WAYS[: r % 3]:
                times[way].append(timed(way, argv, env))
        print_rows(name, times)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    shutil.rmtree(home, ignore_errors=True)


def sparse_copy(tree: Path, dest: Path) -> int:
    """Copy `tree` into `dest`: folders, links, and files of the same size (sparse,
    no content), modes and times. Returns the number of files."""
    n = 0
    for folder, dirs, files in os.walk(tree):
        target = dest / os.path.relpath(folder, tree)
        target.mkdir(parents=True, exist_ok=True)
        for name in [*dirs, *files]:
            source, copy = os.path.join(folder, name), target / name
            st = os.lstat(source)
            if os.path.islink(source):
                os.symlink(os.readlink(source), copy)
                continue
            if os.path.isdir(source):
                continue  # made when os.walk enters it
            with open(copy, "wb") as fh:
                fh.truncate(st.st_size)
            os.chmod(copy, st.st_mode & 0o7777)
            os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
            n += 1
    return n


def cold(given: Path | None, image_dir: Path, repeats: int) -> None:
    """`dlm show` on a tree out of every cache, per way (module docstring)."""
    tree = given or Path(sysconfig.get_paths()["stdlib"])
    image = image_dir / f"dlm-walk-cold-{tree.name}.img"
    mount = Path(tempfile.mkdtemp(prefix="dlm-walk-cold-"))
    if not image.exists():
        subprocess.run(["truncate", "-s", "8G", str(image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-N", "400000", str(image)], check=True)
        subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
        try:
            print(f"copied {sparse_copy(tree, mount / 'tree'):,} files of {tree} into {image}", flush=True)
        finally:
            subprocess.run(["umount", str(mount)], check=True)
    home = Path(tempfile.mkdtemp(prefix="dlm-walk-bench-"))
    env = dict(os.environ, DLM_HOME=str(home), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    doc = tree_doc(home, mount / "tree") if given else stdlib_doc(home, str(mount / "tree"))
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    print(f"load average before: {os.getloadavg()[0]:.1f}\n{HEADER}", flush=True)
    for r in range(repeats):
        for way in WAYS[r % 3 :] + WAYS[: r % 3]:
            device = subprocess.run(
                ["losetup", "-f", "--show", "--direct-io=on", "--read-only", str(image)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout.strip()
            try:
                subprocess.run(["mount", "-o", "ro", device, str(mount)], check=True)
                try:
                    times[way].append(timed(way, ["show", str(doc)], env))
                finally:
                    subprocess.run(["umount", str(mount)], check=True)
            finally:
                subprocess.run(["losetup", "-d", device], check=True)
    print_rows(f"dlm show, cold ({tree.name})", times)
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

"""Wall-clock seconds of whole `dlm` commands, process start included.

    .venv/bin/python benchmarks/start_times.py [--linux-root DIR --cache-from DIR]
    .venv/bin/python benchmarks/start_times.py --doctor-ab [--repeats 15]

Measured, each in a fresh process, one after another:

- `dlm show`, `dlm cache show`, `dlm metrics` on a document whose cache exists, and
  `dlm doctor`;
- `dlm cache build` warm: every row already cached. With `--linux-root` the document
  takes the first 50,000 Linux files under 32 KiB (the `linux50k` corpus of
  `section_cache.py`); `--cache-from` seeds the store's cache with the cache that
  `section_cache.py` built for that corpus (same files, same tokenizer), otherwise
  this script builds it cold first. Without `--linux-root`: the standard library;
- `dlm train --max-steps 1` on `examples/stdlib.dlm`: seconds from process start to
  the end of the first training step, cold (empty cache) and warm (cache filled by
  the cold run), and the whole command.

dlm's modules are compiled to bytecode first, as `pip install` leaves them (and as an
editable install writes them on its first run); without that, a machine that sets
`PYTHONDONTWRITEBYTECODE` compiles every imported dlm module from source on every
command. `--no-bytecode` measures that case.

`--doctor-ab` times only `dlm doctor` (the machine's facts from `dlm.lock.probe`,
without torch) against `dlm doctor --torch` (the same facts asked of torch, as the lock
asks them), alternating which runs first, and prints the medians and their ratio.

Also prints whether each command imported torch (`dlm train` must; the others, `dlm
doctor` included, must not). Other processes on the machine disturb absolute numbers.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

RUN = """
import sys, time
from dlm.cli.main import app
import dlm.cli.progress as progress
first = []
def timed(on_step):
    def wrapped(self, step, *rest):
        if not first:
            first.append(time.time())
        return on_step(self, step, *rest)
    return wrapped
for sink in (progress.RichTrainSink, progress.PlainTrainSink):  # a terminal, or not
    sink.on_step = timed(sink.on_step)
try:
    app(sys.argv[1:], standalone_mode=False)
finally:
    print("BENCH " + repr((first[0] if first else None, "torch" in sys.modules)), file=sys.stderr)
"""

DOC = """---
dlm_id: 01JDSTART0000000000000000{suffix}
dlm_version: 1
base_model: smollm2-135m
training:
  sources:
    - path: {root}
      include: ["**/*"]
      exclude: [".git/"]
      max_bytes_per_file: {cap}
      {max_files}
---

A document over {what}.
"""


def command(argv: list[str], env: dict[str, str]) -> dict:
    start = time.time()
    proc = subprocess.run([sys.executable, "-c", RUN, *argv], env=env, capture_output=True, text=True)
    wall = time.time() - start
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} failed:\n{proc.stderr[-2000:]}")
    first, torch = eval(proc.stderr.rsplit("BENCH ", 1)[1].strip())
    out = {"wall_s": wall, "torch": torch}
    if first is not None:
        out["first_step_s"] = first - start
    print(f"dlm {' '.join(argv[:2])}: {json.dumps(out)}", file=sys.stderr, flush=True)
    return out


def doctor_ab(env: dict[str, str], repeats: int) -> None:
    """`dlm doctor` (probe) and `dlm doctor --torch`, alternating (module docstring)."""
    ways = {"probe": ["doctor"], "torch": ["doctor", "--torch"]}
    runs: dict[str, list[dict]] = {way: [] for way in ways}
    print(f"load average before: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for r in range(repeats):
        for way in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            runs[way].append(command(ways[way], env))
    med = {way: statistics.median(r["wall_s"] for r in got) for way, got in runs.items()}
    print(f"load average after: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    print("| command | repeats | median wall s | imports torch |")
    print("|---|---|---|---|")
    for way, argv in ways.items():
        torch = any(r["torch"] for r in runs[way])
        print(f"| `dlm {' '.join(argv)}` | {repeats} | {med[way]:.2f} | {'yes' if torch else 'no'} |")
    print(f"\n`dlm doctor --torch` / `dlm doctor`: {med['torch'] / med['probe']:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--linux-root", type=Path)
    parser.add_argument("--cache-from", type=Path, help="a linux50k cache built by section_cache.py")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-train", action="store_true")
    parser.add_argument("--no-bytecode", action="store_true", help="remove dlm's bytecode and write none")
    parser.add_argument("--doctor-ab", action="store_true", help="dlm doctor with the probe and with --torch")
    args = parser.parse_args()
    package = Path(__import__("dlm").__file__).parent
    if args.no_bytecode:
        for cached in package.rglob("__pycache__"):
            shutil.rmtree(cached)
    else:
        compileall.compile_dir(package, quiet=1)
    home = Path(tempfile.mkdtemp(prefix="dlm-start-"))
    env = dict(os.environ, DLM_HOME=str(home), HF_HUB_OFFLINE="1")
    if args.no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("TOKENIZERS_PARALLELISM", None)
    if args.doctor_ab:
        doctor_ab(env, args.repeats)
        shutil.rmtree(home, ignore_errors=True)
        return
    if args.linux_root:
        doc_text = DOC.format(
            suffix="M",
            root=args.linux_root,
            cap=32 << 10,
            max_files="max_files: 50000",
            what="the first 50,000 Linux files under 32 KiB",
        )
    else:
        doc_text = (
            DOC.format(suffix="S", root="$DLM_STDLIB", cap=1_000_000, max_files="", what="the standard library")
            .replace('["**/*"]', '["**/*.py"]')
            .replace('[".git/"]', '["site-packages/", "dist-packages/", "__pycache__/"]')
        )
    doc = home / "corpus.dlm"
    doc.write_text(doc_text)
    results: dict[str, dict] = {}
    if args.cache_from:
        from dlm.doc import load_document
        from dlm.paths import cache_store_dir
        from dlm.store import open_store

        # the shared store holds the entries; the document's own folder its stat snapshots
        os.environ["DLM_HOME"] = str(home)
        shutil.copytree(args.cache_from, cache_store_dir(), ignore=shutil.ignore_patterns("state.sqlite*", "leases"))
        store = open_store(load_document(doc).frontmatter.dlm_id)
        store.cache_state_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(Path(args.cache_from) / "state.sqlite", store.cache_state_dir / "state.sqlite")
    results["cache build (first)"] = command(["cache", "build", str(doc)], env)
    for name, argv in [
        ("cache build warm", ["cache", "build", str(doc)]),
        ("cache show", ["cache", "show", str(doc)]),
        ("show", ["show", str(doc)]),
        ("metrics", ["metrics", str(doc)]),
        ("doctor", ["doctor"]),
    ]:
        runs = [command(argv, env) for _ in range(args.repeats)]
        results[name] = {"wall_s": statistics.median(r["wall_s"] for r in runs), "torch": any(r["torch"] for r in runs)}
    if not args.no_train:
        stdlib_doc = REPO / "examples" / "stdlib.dlm"
        results["train cold"] = command(["train", str(stdlib_doc), "--max-steps", "1"], env)
        results["train warm"] = command(["train", str(stdlib_doc), "--max-steps", "1"], env)
    print("| command | wall s | first step s | imports torch |")
    print("|---|---|---|---|")
    for name, r in results.items():
        first = f"{r['first_step_s']:.2f}" if "first_step_s" in r else "-"
        print(f"| `dlm {name}` | {r['wall_s']:.2f} | {first} | {'yes' if r['torch'] else 'no'} |")
    shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()

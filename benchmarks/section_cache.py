"""Tokenized-section cache benchmark: cache vs raw batch encode vs `datasets.map`.

Run (stdlib only, then with Debian's linux-source-6.1 as the large corpus):

    .venv/bin/python benchmarks/section_cache.py
    .venv/bin/python benchmarks/section_cache.py --linux

For each corpus, in one process, side by side, on the real SmolLM2 tokenizer:

- raw: read every file and `encode_batch` it (batches of 1000), nothing stored —
  the least work any uncached path does;
- cold / warm / one file edited / sequence_len changed: `dlm.rows.walk` +
  `CachedRowTokenizer.tokenize`, timed from walk start until `TokenizedRows` is
  ready (sequence_len changed also builds the window dataset at a new length);
- `datasets`: `Dataset.from_generator` over the same files (its fingerprint covers
  each file's path, size and mtime, so change detection is equivalent) and
  `.map(tokenize, batched=True)` with its on-disk cache, cold and warm;
- bytes on disk per token: cache folder bytes / tokens stored.

On Linux the walk visits all ~78.6K files; those over `--linux-max-file-bytes`
(default 8 KiB, ~53K files kept) are skipped by size so that the three cold encodes
(raw, cache, datasets) of this 2-core machine fit in minutes.

The Linux corpus is installed (`apt-get install -y linux-source-6.1`) and unpacked
into the work folder when missing. Numbers are wall-clock seconds on this machine;
compare only within one run. Prints a markdown table and writes JSON next to it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from dlm.cache import CachedRowTokenizer
from dlm.cache.verbs import disk_bytes
from dlm.models import load_tokenizer, resolve_base_model
from dlm.rows.read import read_file_text, render_file_row
from dlm.rows.types import RowSet
from dlm.rows.walk import walk_sources
from dlm.tokenize.fingerprint import tokenizer_sha256

LINUX_TAR = Path("/usr/src/linux-source-6.1.tar.xz")
BATCH = 1000


def directive(path: Path, include: list[str], exclude: list[str], max_file_bytes: int = 1 << 20) -> Any:
    return SimpleNamespace(path=str(path), include=include, exclude=exclude,
                           max_bytes_per_file=max_file_bytes, max_files=None)


def stdlib_corpus() -> Any:
    return directive(Path(sysconfig.get_paths()["stdlib"]), ["**/*.py"],
                     ["site-packages/", "dist-packages/", "__pycache__/"])


def linux_corpus(work: Path, max_file_bytes: int) -> Any:
    root = work / "linux-source-6.1"
    if not root.is_dir():
        if not LINUX_TAR.exists():
            subprocess.run(["apt-get", "install", "-y", "linux-source-6.1"], check=True)
        print(f"unpacking {LINUX_TAR} into {work} (once)", file=sys.stderr)
        with tarfile.open(LINUX_TAR) as tar:
            tar.extractall(work, filter="data")
    return directive(root, ["**/*"], [".git/"], max_file_bytes)


def timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def raw_encode(tok: Any, files: list) -> tuple[float, int]:
    """Read + render + encode_batch, nothing kept but a token count."""
    backend, eos, tokens = tok.backend_tokenizer, tok.eos_token, 0
    start = time.perf_counter()
    for i in range(0, len(files), BATCH):
        texts = []
        for fr in files[i : i + BATCH]:
            got = read_file_text(fr)
            if not isinstance(got, str):
                texts.append(render_file_row(fr.relpath, got.text) + eos)
        tokens += sum(len(e.ids) for e in backend.encode_batch(texts, add_special_tokens=True))
    return time.perf_counter() - start, tokens


def cache_run(corpus: Any, cache_dir: Path, tok: Any, sha: str, run_id: str) -> tuple[float, Any]:
    """Seconds from walk start until TokenizedRows is ready; rows carry `walk_s`."""

    def go() -> Any:
        walk_s, walk = timed(lambda: walk_sources([corpus], Path(".")))
        rows = CachedRowTokenizer(cache_dir, tok, sha, max_bytes=100 << 30, run_id=run_id).tokenize(
            RowSet([], walk.files)
        )
        rows.walk_s = walk_s
        return rows

    return timed(go)


def gen_rows(files: list[tuple[str, str, int, int]], eos: str) -> Any:
    for path, relpath, _size, _mtime in files:
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue
        yield {"text": render_file_row(relpath, data.decode("utf-8", "replace")) + eos}


def datasets_run(corpus: Any, tok: Any, hf_dir: Path) -> tuple[float, int]:
    import datasets

    def go() -> int:
        walk = walk_sources([corpus], Path("."))
        files = [(str(f.path), f.relpath, f.size, f.mtime_ns) for f in walk.files]
        ds = datasets.Dataset.from_generator(
            gen_rows, gen_kwargs={"files": files, "eos": tok.eos_token}, cache_dir=str(hf_dir)
        )
        out = ds.map(lambda b: tok(b["text"]), batched=True, batch_size=BATCH, remove_columns=["text"],
                     new_fingerprint=ds._fingerprint + "-smollm2-tokenize")
        return len(out)

    return timed(go)


def datasets_load_run(corpus: Any, tok: Any, hf_dir: Path) -> tuple[float, int]:
    """The usual `datasets` workflow: `load_dataset("text", sample_by="document")` over
    the walked files (cached by file path and mtime), then a cached `.map`."""
    import datasets

    def go() -> int:
        walk = walk_sources([corpus], Path("."))
        files = [str(f.path) for f in walk.files]
        ds = datasets.load_dataset("text", data_files=files, sample_by="document", split="train",
                                   encoding_errors="replace",
                                   cache_dir=str(hf_dir))
        out = ds.map(lambda b: tok([t + tok.eos_token for t in b["text"]]), batched=True,
                     batch_size=BATCH, remove_columns=["text"],
                     new_fingerprint=ds._fingerprint + "-smollm2-tokenize")
        return len(out)

    return timed(go)


def bench(name: str, corpus: Any, work: Path, tok: Any, sha: str, warm_repeats: int, with_datasets: bool,
          load_dataset: bool = False, datasets_edit: bool = False) -> dict:
    from dlm.train.dataset import WindowDataset

    cache_dir = work / f"{name}-cache"
    shutil.rmtree(cache_dir, ignore_errors=True)
    walk_s, walk = timed(lambda: walk_sources([corpus], Path(".")))
    files = walk.files
    print(f"[{name}] {len(files)} files ({dict(walk.skipped)} skipped); walk {walk_s:.2f}s", file=sys.stderr)
    out: dict[str, Any] = {"corpus": name, "files": len(files), "walk_s": walk_s,
                           "walked": len(files) + sum(walk.skipped.values())}
    out["raw_s"], out["tokens"] = raw_encode(tok, files)
    print(f"[{name}] raw {out['raw_s']:.2f}s, {out['tokens']} tokens", file=sys.stderr)
    out["cold_s"], cold = cache_run(corpus, cache_dir, tok, sha, "cold")
    out["rows"] = len(cold)
    warms = [cache_run(corpus, cache_dir, tok, sha, f"warm{i}") for i in range(warm_repeats)]
    out["warm_s"] = statistics.median(w[0] for w in warms)
    out["warm_tokenize_s"] = statistics.median(w[0] - w[1].walk_s for w in warms)
    _, warm = cache_run(corpus, cache_dir, tok, sha, "warm-check")
    assert warm.stats.cache_misses == 0, warm.stats
    victim = Path(next(f.path for f in files if f.path.endswith((".py", ".c", ".h"))))
    original = victim.read_bytes()
    try:
        victim.write_bytes(original + b"\n# edited by the benchmark\n")
        out["edit_s"], edited = cache_run(corpus, cache_dir, tok, sha, "edit")
        out["edit_misses"] = edited.stats.cache_misses
        out["edit_tokenize_s"] = out["edit_s"] - edited.walk_s
    finally:
        victim.write_bytes(original)
    cache_run(corpus, cache_dir, tok, sha, "restore")

    def seq_changed() -> Any:
        _, rows = cache_run(corpus, cache_dir, tok, sha, "seqlen")
        return len(WindowDataset(rows, 512)), rows.stats.cache_misses

    out["seqlen_s"], (out["seqlen_examples"], out["seqlen_misses"]) = timed(seq_changed)
    checkpoint = sqlite3.connect(cache_dir / "index.sqlite")  # WAL folded in: steady-state size
    checkpoint.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    checkpoint.close()
    out["bytes_on_disk"] = disk_bytes(cache_dir)
    out["bytes_per_token"] = out["bytes_on_disk"] / max(1, int(cold.lengths.sum()))
    if with_datasets:
        run = datasets_load_run if load_dataset else datasets_run
        hf_dir = work / f"{name}-hf{'-load' if load_dataset else ''}"
        shutil.rmtree(hf_dir, ignore_errors=True)
        out["datasets_mode"] = "load_dataset" if load_dataset else "from_generator"
        out["datasets_cold_s"], _ = run(corpus, tok, hf_dir)
        out["datasets_warm_s"] = statistics.median(run(corpus, tok, hf_dir)[0] for _ in range(warm_repeats))
        out["datasets_bytes"] = sum(p.stat().st_size for p in hf_dir.rglob("*") if p.is_file())
        if datasets_edit:
            try:
                victim.write_bytes(original + b"\n# edited by the benchmark\n")
                out["datasets_edit_s"], _ = run(corpus, tok, hf_dir)
            finally:
                victim.write_bytes(original)
    print(f"[{name}] {json.dumps(out)}", file=sys.stderr)
    return out


def table(results: list[dict]) -> str:
    """Markdown table; ratios are of numbers measured in this run."""
    head = ["corpus", "files (rows of walked)", "tokens", "walk s", "raw encode s", "cold s", "cold/raw",
            "warm s (cache part)", "cold/warm", "1 file edited s", "seq_len changed s",
            "datasets", "datasets cold s", "datasets warm s", "datasets warm / warm",
            "datasets 1 file edited s", "bytes/token"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def opt(r: dict, key: str, fmt: str) -> str:
        return format(r[key], fmt) if key in r else "-"

    for r in results:
        cells = [
            r["corpus"], f"{r['files']:,} of {r['walked']:,}", f"{r['tokens']:,}", f"{r['walk_s']:.2f}",
            f"{r['raw_s']:.2f}", f"{r['cold_s']:.2f}", f"{r['cold_s'] / r['raw_s']:.2f}x",
            f"{r['warm_s']:.3f} ({r['warm_tokenize_s']:.3f})", f"{r['cold_s'] / r['warm_s']:.0f}x",
            f"{r['edit_s']:.3f} ({r['edit_misses']} miss)", f"{r['seqlen_s']:.3f} ({r['seqlen_misses']} miss)",
            r.get("datasets_mode", "-"), opt(r, "datasets_cold_s", ".2f"), opt(r, "datasets_warm_s", ".3f"),
            f"{r['datasets_warm_s'] / r['warm_s']:.2f}x" if "datasets_warm_s" in r else "-",
            opt(r, "datasets_edit_s", ".2f"), f"{r['bytes_per_token']:.3f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--linux", action="store_true", help="also run on linux-source-6.1 (~78K files)")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "dlm-bench")
    parser.add_argument("--warm-repeats", type=int, default=3)
    parser.add_argument("--no-datasets", action="store_true", help="skip the datasets.map comparison")
    parser.add_argument("--only-linux", action="store_true", help="skip the stdlib corpus")
    parser.add_argument("--load-dataset", action="store_true",
                        help="compare with load_dataset('text', sample_by='document') + map instead of "
                        "Dataset.from_generator (stat-fingerprinted) + map")
    parser.add_argument("--datasets-edit", action="store_true",
                        help="also time datasets after one file edit (a full re-tokenization)")
    parser.add_argument("--linux-max-file-bytes", type=int, default=8192,
                        help="Linux files larger than this are walked but skipped (too-large), "
                        "which keeps three cold encodes of the tree within minutes; 1048576 takes all")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    tok = load_tokenizer(resolve_base_model("smollm2-135m"))
    sha = tokenizer_sha256(tok)
    corpora = [] if args.only_linux else [("stdlib", stdlib_corpus())]
    if args.linux or args.only_linux:
        corpora.append(("linux-6.1", linux_corpus(args.work, args.linux_max_file_bytes)))
    results = [
        bench(name, c, args.work, tok, sha, args.warm_repeats, not args.no_datasets, args.load_dataset,
              args.datasets_edit)
        for name, c in corpora
    ]
    print(table(results))
    (args.work / "section_cache.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

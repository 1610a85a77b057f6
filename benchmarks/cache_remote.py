"""Shared store and remote tier benchmark: a fresh home warmed from a remote, and a
second document over the same tree.

Run (Debian's linux-source-6.1, files of at most 8 KiB: ~53K rows; `--stdlib` for a
quick run on the standard library):

    .venv/bin/python benchmarks/cache_remote.py --linux-root DIR   # unpacked linux-source-6.1
    .venv/bin/python benchmarks/cache_remote.py --stdlib

In one process, side by side, on the real SmolLM2 tokenizer, each timed from walk
start until `TokenizedRows` is ready ("dataset ready"):

- cold: home A, empty store, empty folder remote: every row encoded, stored, pushed;
- push: home A's entries sent to the remotes (a folder on this disk, and moto's S3
  server in its own process on 127.0.0.1 through s3fs);
- fresh home + warm remote (folder, S3): home B / C with an empty store: every file
  read and hashed, misses pulled pack by pack; bytes moved and their rate reported,
  and the time left once the pull is taken out;
- warm: home A again (stat snapshots trusted, nothing read);
- second document: home A, another document over the same tree (its own state, no
  stat snapshot yet): it starts from the first document's snapshot (as `dlm train`
  does with the other documents of its home), zero new entries.

Numbers are wall-clock seconds on this machine; compare only within one run. Prints
a markdown table and writes JSON next to the work folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from section_cache import corpus as bench_corpus

from dlm.cache import CachedRowEncoder
from dlm.cache.schema import connect
from dlm.models import load_tokenizer, resolve_base_model
from dlm.rows.types import RowSet
from dlm.rows.walk import walk_sources
from dlm.tokenize.fingerprint import tokenizer_sha256


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_s3(work: Path) -> tuple[subprocess.Popen, str]:
    """moto's S3 server in its own process; returns it and a fresh bucket URL."""
    port = free_port()
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.environ.update(
        AWS_ACCESS_KEY_ID="bench",
        AWS_SECRET_ACCESS_KEY="bench",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
    )
    import s3fs

    for _ in range(100):
        try:
            s3fs.S3FileSystem(skip_instance_cache=True).mkdir("dlm-bench")
            break
        except Exception:  # server still starting
            time.sleep(0.1)
    return server, "s3://dlm-bench/cache"


def ready(corpus: Any, home: Path, tok: Any, sha: str, doc: str, remote: str | None, run_id: str) -> dict:
    """One run from walk start to dataset ready; what it did."""
    start = time.perf_counter()
    walk = walk_sources([corpus], Path("."))
    # as `dlm train` does: the home's other documents' state folders are siblings
    siblings = sorted(p for p in home.glob("*") if p.is_dir() and p.name not in (doc, "store"))
    cached = CachedRowEncoder(
        home / doc,
        tok,
        sha,
        max_bytes=100 << 30,
        run_id=run_id,
        store_dir=home / "store",
        doc_id=doc,
        remote=remote,
        sibling_dirs=siblings,
    )
    rows = cached.tokenize(RowSet([], walk.files))
    seconds = time.perf_counter() - start
    rep = cached.last_report
    assert rep is not None
    out = {
        "s": seconds,
        "rows": len(rows),
        "hits": rows.stats.cache_hits,
        "misses": rows.stats.cache_misses,
        "admitted": rep.admitted,
        "warnings": rep.warnings,
    }
    if rep.remote:
        pulled, pushed = rep.remote
        out.update(
            pulled_bytes=pulled.bytes,
            pulled_entries=pulled.entries,
            pull_s=pulled.seconds,
            pushed_bytes=pushed.bytes,
            push_s=pushed.seconds,
        )
    return out


def entries(home: Path) -> int:
    return int(connect(home / "store").execute("SELECT COUNT(*) FROM entries").fetchone()[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "dlm-bench")
    parser.add_argument("--stdlib", action="store_true", help="the standard library instead of Linux")
    parser.add_argument("--linux-root", type=Path, help="the unpacked linux-source-6.1 folder")
    parser.add_argument("--linux-max-file-bytes", type=int, default=8192)
    parser.add_argument(
        "--reuse-cold",
        action="store_true",
        help="keep home A and the folder remote of the previous run (skip the cold encode)",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    corpus = bench_corpus("stdlib", None) if args.stdlib else bench_corpus("linux", args.linux_root)
    if not args.stdlib:
        corpus.max_bytes_per_file = args.linux_max_file_bytes
    name = "stdlib" if args.stdlib else "linux-6.1"
    tok = load_tokenizer(resolve_base_model("smollm2-135m"))
    sha = tokenizer_sha256(tok)
    base = args.work / "remote-bench"
    previous = args.work / "cache_remote.json"
    res: dict[str, Any] = {"corpus": name}
    if args.reuse_cold and previous.exists() and (base / "A").is_dir():
        old = json.loads(previous.read_text())
        res.update(
            cold=old["cold"], push_folder_s=old["push_folder_s"], pushed_bytes=old["pushed_bytes"], cold_reused=True
        )
        for home in ("B", "C"):
            shutil.rmtree(base / home, ignore_errors=True)
        shutil.rmtree(base / "A" / "doc2", ignore_errors=True)
    else:
        shutil.rmtree(base, ignore_errors=True)
    folder_remote = str(base / "remote-folder")
    server, s3_remote = start_s3(base)
    try:
        if "cold" not in res:
            res["cold"] = ready(corpus, base / "A", tok, sha, "doc1", folder_remote, "cold")
            res["push_folder_s"], res["pushed_bytes"] = res["cold"]["push_s"], res["cold"]["pushed_bytes"]
        # the S3 remote gets the same entries through an explicit push from home A
        from dlm.cache.remote import RemoteTier

        conn = connect(base / "A" / "store")
        tier = RemoteTier(s3_remote, conn, base / "A" / "store", print)
        tier.push()
        res["push_s3_s"] = tier.pushed.seconds
        conn.close()
        res["fresh_folder"] = ready(corpus, base / "B", tok, sha, "doc1", folder_remote, "fresh-folder")
        res["fresh_s3"] = ready(corpus, base / "C", tok, sha, "doc1", s3_remote, "fresh-s3")
        res["warm"] = ready(corpus, base / "A", tok, sha, "doc1", None, "warm")
        before = entries(base / "A")
        res["second_doc"] = ready(corpus, base / "A", tok, sha, "doc2", None, "second-doc")
        res["second_doc_new_entries"] = entries(base / "A") - before
        res["second_doc_warm"] = ready(corpus, base / "A", tok, sha, "doc2", None, "second-doc-warm")
    finally:
        server.terminate()
        server.wait()
    for key in ("fresh_folder", "fresh_s3"):
        r = res[key]
        assert r["misses"] == 0 and r["admitted"] == 0, r
        r["rate_mb_s"] = r["pulled_bytes"] / r["pull_s"] / 1e6 if r["pull_s"] else 0.0
        r["without_pull_s"] = r["s"] - r["pull_s"]
    assert res["second_doc"]["admitted"] == 0 and res["second_doc_new_entries"] == 0
    print(table(res))
    (args.work / "cache_remote.json").write_text(json.dumps(res, indent=2))


def table(r: dict) -> str:
    rows = [
        (
            "cold: empty store, empty folder remote (encode everything, push)",
            r["cold"]["s"],
            f"{r['cold']['admitted']:,} entries stored",
        ),
        ("push to folder remote (in cold run)", r["push_folder_s"], f"{r['pushed_bytes']:,} bytes"),
        ("push to S3 (moto) remote", r["push_s3_s"], ""),
    ]
    for key, label in (
        ("fresh_folder", "fresh home + warm folder remote"),
        ("fresh_s3", "fresh home + warm S3 remote"),
    ):
        x = r[key]
        rows.append(
            (
                label,
                x["s"],
                f"{x['pulled_bytes']:,} bytes pulled in {x['pull_s']:.2f} s "
                f"({x['rate_mb_s']:.1f} MB/s); {x['without_pull_s']:.2f} s without the pull; "
                f"{x['misses']} misses",
            )
        )
    rows += [
        ("warm (same home, same document)", r["warm"]["s"], f"{r['warm']['misses']} misses"),
        (
            "second document, same tree, same home",
            r["second_doc"]["s"],
            f"{r['second_doc_new_entries']} new entries, {r['second_doc']['misses']} misses",
        ),
        ("second document, warm", r["second_doc_warm"]["s"], ""),
    ]
    lines = [
        f"corpus: {r['corpus']}, {r['cold']['rows']:,} rows",
        "",
        "| run | seconds to dataset ready | x cold | notes |",
        "|---|---|---|---|",
    ]
    cold = r["cold"]["s"]
    lines += [f"| {label} | {s:.2f} | {cold / s:.1f}x | {note} |" for label, s, note in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    main()

#!/usr/bin/env python
"""Record the golden adapter hash for this machine's version tuple.

Trains `tests/golden/determinism/golden.dlm` in fresh processes (fresh `DLM_HOME` each,
one torch thread, distinct `PYTHONHASHSEED`s), refuses to record anything unless the
runs agree byte for byte, then shows the stored and the new hash. Without `--approve`
it writes nothing (a dry run); with it, it writes
`tests/golden/determinism/tuple-<hash>.json` and updates `.determinism/lock.json`.

    .venv/bin/python scripts/regen-determinism-golden.py            # dry run
    .venv/bin/python scripts/regen-determinism-golden.py --approve  # write

Exit status: 0 done (or nothing to change), 1 training failed or the runs disagree.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

# the golden tooling is repository-only: it lives beside the tests that use it
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "lock"))

from golden_tool import (  # noqa: E402
    GOLDEN_DOC,
    GoldenRecord,
    file_sha256,
    golden_env,
    golden_tuple,
    read_golden,
    run_train,
    settle,
    tuple_file,
    tuple_hash,
    write_golden,
)

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--approve", action="store_true", help="write the new golden (default: dry run)")
    parser.add_argument("--runs", type=int, default=2, help="fresh training runs that must agree (>= 2)")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs must be at least 2: one run proves nothing about determinism")

    tup = golden_tuple()
    thash = tuple_hash(tup)
    doc = REPO / GOLDEN_DOC
    print(f"tuple {thash}\n  platform {tup['platform']}\n  versions {dict(tup['versions'])}")

    shas = []
    with tempfile.TemporaryDirectory(prefix="dlm-golden-") as tmp:
        for i in range(args.runs):
            home = Path(tmp) / f"home-{i}"
            try:
                out = run_train(doc, golden_env(home, hash_seed=i + 1))
            except RuntimeError as exc:
                print(f"run {i + 1}: training failed:\n{exc}", file=sys.stderr)
                return 1
            print(f"run {i + 1}: {out['adapter_sha256']} (run {out.get('run_id')})")
            shas.append(out["adapter_sha256"])
    if len(set(shas)) != 1:
        print("the runs disagree: training is not deterministic on this machine; nothing recorded", file=sys.stderr)
        return 1

    new = GoldenRecord(tuple_hash=thash, tuple=tup, document_sha256=file_sha256(doc), adapter_sha256=shas[0])
    old = read_golden(REPO, thash)
    return settle(
        REPO,
        old,
        new,
        tuple_file(REPO, thash),
        args.approve,
        lambda: f"{write_golden(REPO, new).relative_to(REPO)} and .determinism/lock.json",
    )


if __name__ == "__main__":
    sys.exit(main())

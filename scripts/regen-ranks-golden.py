#!/usr/bin/env python
"""Record the two-rank golden (`dlm train --nproc 2`, CPU gloo) for this machine's tuple.

Trains `tests/golden/determinism/ranks2.dlm` twice on two ranks (fresh `DLM_HOME`, one
thread per rank) and once in one process with two accumulation steps (the twin);
records nothing unless all three agree byte for byte. Without `--approve` a dry run.

    .venv/bin/python scripts/regen-ranks-golden.py            # dry run
    .venv/bin/python scripts/regen-ranks-golden.py --approve  # write

Exit status: 0 done, 1 a run failed or the runs disagree.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "lock"))

from golden_tool import file_sha256, golden_env, golden_tuple, run_train, settle, tuple_hash  # noqa: E402
from ranks_golden import (  # noqa: E402
    RANKS_DOC,
    RanksGolden,
    ranks_file,
    read_ranks_golden,
    run_ranks,
    twin_text,
    write_ranks_golden,
)

REPO = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--approve", action="store_true", help="write the new golden (default: dry run)")
    args = parser.parse_args(argv)
    tup = golden_tuple()
    thash = tuple_hash(tup)
    doc = REPO / RANKS_DOC
    print(f"tuple {thash}\n  platform {tup['platform']}")
    shas = []
    with tempfile.TemporaryDirectory(prefix="dlm-ranks-golden-") as tmp:
        try:
            for i in range(2):
                out = run_ranks(doc, golden_env(Path(tmp) / f"home-{i}", hash_seed=i + 1))
                print(f"2 ranks, run {i + 1}: {out['adapter_sha256']}")
                shas.append(out["adapter_sha256"])
            twin = Path(tmp) / "twin.dlm"
            twin.write_text(twin_text(doc.read_text()))
            out = run_train(twin, golden_env(Path(tmp) / "home-twin", hash_seed=3))
        except RuntimeError as exc:
            print(f"training failed:\n{exc}", file=sys.stderr)
            return 1
        print(f"1 process, 2 accumulation steps: {out['adapter_sha256']}")
        shas.append(out["adapter_sha256"])
    if len(set(shas)) != 1:
        print("the runs disagree; nothing recorded", file=sys.stderr)
        return 1
    new = RanksGolden(thash, tup, file_sha256(doc), shas[0])
    old = read_ranks_golden(REPO, thash)
    return settle(
        REPO,
        old,
        new,
        ranks_file(REPO, thash),
        args.approve,
        lambda: str(write_ranks_golden(REPO, new).relative_to(REPO)),
    )


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Regenerate docs/img/stdlib-loss.png from a real run of examples/stdlib.dlm.

Trains the example as `make demo` does, in a fresh, temporary DLM_HOME (so no earlier run
is mixed in): held-out loss before the first step and after the last (and every
`--every` steps when given), then draws the plot with `dlm metrics --plot`. Takes a few
minutes on an otherwise idle 2-core CPU.

    .venv/bin/python scripts/plot-stdlib-loss.py [--steps N] [--every K] [--out PATH]

Exit status: 0 written, else the failing command's status.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "stdlib.dlm"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=None, help="max_steps (default: the example's)")
    parser.add_argument("--every", type=int, default=None, help="also measure held-out loss every K steps")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "img" / "stdlib-loss.png")
    args = parser.parse_args(argv)
    dlm = [sys.executable, "-m", "dlm"]
    with tempfile.TemporaryDirectory(prefix="dlm-plot-") as tmp:
        text = EXAMPLE.read_text()
        if args.every:
            if "\n  eval:\n" not in text:
                print(f"{EXAMPLE} has no training.eval block to extend", file=sys.stderr)
                return 1
            text = text.replace("\n  eval:\n", f"\n  eval:\n    every_steps: {args.every}\n", 1)
        if args.steps:
            text = re.sub(r"max_steps: \d+", f"max_steps: {args.steps}", text, count=1)
        doc = Path(tmp) / "stdlib.dlm"
        doc.write_text(text)
        env = {**os.environ, "DLM_HOME": str(Path(tmp) / "home")}
        for cmd in (dlm + ["train", str(doc)], dlm + ["metrics", str(doc), "--plot", str(args.out)]):
            print("$", " ".join(cmd[2:]), flush=True)
            done = subprocess.run(cmd, env=env)
            if done.returncode:
                return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())

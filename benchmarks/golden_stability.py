"""Is the golden document's adapter byte-stable run to run on this machine, per precision?

Trains `tests/golden/determinism/golden.dlm` `--runs` times for each precision in
`--precisions` (the document with `training.precision` replaced), each in a fresh process
with a fresh `DLM_HOME` (the golden environment: one CPU thread, offline, a distinct
`PYTHONHASHSEED` per run), and prints each run's adapter sha256, whether the runs agree,
and the device torch trains on. Records nothing: `scripts/regen-determinism-golden.py`
writes goldens (fp32 on a CPU); this answers whether a golden could exist for another
machine class, such as bf16 on a CUDA GPU, before anyone records one.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/golden_stability.py [--runs 2] [--precisions fp32,bf16]

Exit status: 0 when every precision's runs agree, 1 when one disagrees or fails.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "lock"))  # the golden tooling lives beside its tests

from golden_tool import GOLDEN_DOC, golden_env, run_train  # noqa: E402


def with_precision(text: str, precision: str) -> str:
    """The golden document with its `precision:` line set to `precision`."""
    out, n = re.subn(r"(?m)^  precision: \S+", f"  precision: {precision}", text, count=1)
    if n != 1:
        raise SystemExit(f"{GOLDEN_DOC}: no `precision:` line under training to replace")
    return out


def device_line() -> str:
    import torch

    if torch.cuda.is_available():
        return (
            f"cuda: {torch.cuda.get_device_name(0)}, torch {torch.__version__}, bf16 {torch.cuda.is_bf16_supported()}"
        )
    return f"cpu, torch {torch.__version__}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--precisions", default="fp32,bf16")
    args = parser.parse_args(argv)
    if args.runs < 2:
        parser.error("--runs must be at least 2: one run proves nothing about stability")
    text = (REPO / GOLDEN_DOC).read_text()
    print(device_line(), flush=True)
    status = 0
    with tempfile.TemporaryDirectory(prefix="dlm-golden-stability-") as tmp:
        for precision in args.precisions.split(","):
            doc = Path(tmp, f"golden-{precision}.dlm")
            doc.write_text(with_precision(text, precision))
            shas = []
            for i in range(args.runs):
                try:
                    out = run_train(doc, golden_env(Path(tmp, f"home-{precision}-{i}"), hash_seed=i + 1))
                except RuntimeError as exc:
                    print(f"{precision} run {i + 1}: failed:\n{exc}", file=sys.stderr)
                    status = 1
                    break
                peak = out.get("accelerator_peak_bytes")
                print(
                    f"{precision} run {i + 1}: {out['adapter_sha256']} loss {out['train_loss']:.4f} "
                    f"steps {out['steps']} step s {out['step_seconds']:.2f}"
                    + (f" GPU peak {peak / 1e6:.0f} MB" if peak else ""),
                    flush=True,
                )
                shas.append(out["adapter_sha256"])
            if len(shas) == args.runs:
                agree = len(set(shas)) == 1
                print(f"{precision}: {args.runs} runs {'agree byte for byte' if agree else 'DISAGREE'}", flush=True)
                status |= 0 if agree else 1
    return status


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python
"""Ask a base model the general probes and say which it answers right.

The probe report counts only the general probes the base model answers right
(`dlm.judge.forgetting`); the set shipped with dlm (`src/dlm/judge/general/probes.json`)
holds only probes the embedded base answers right, greedily, with its chat template, at
the report's default `max_new_tokens`. Rerun this after editing the set, or to see how
another base model fares:

    PYTHONPATH=src .venv/bin/python scripts/check-general-probes.py
    PYTHONPATH=src .venv/bin/python scripts/check-general-probes.py --base qwen2.5-0.5b --probes my-probes.json

Exit status: 0 every probe passed, 1 some failed (listed with the base's reply).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dlm.doc.schema import EvalConfig
from dlm.judge.forgetting import base_check, general_probe_items
from dlm.judge.general import load_general_probes, parse_general_probes
from dlm.models import load_model, load_tokenizer, resolve_base_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="smollm2-135m", help="base model spec, as a document's base_model")
    parser.add_argument("--probes", type=Path, help="a probe file (default: the set shipped with dlm)")
    parser.add_argument("--system-prompt", default=None, help="a document's system_prompt (default: none)")
    parser.add_argument(
        "--max-new-tokens",
        type=int,
        default=EvalConfig.model_fields["max_new_tokens"].default,
        help="reply length (default: training.eval.max_new_tokens' default)",
    )
    args = parser.parse_args()
    probe_set = (
        parse_general_probes(args.probes.read_bytes(), str(args.probes)) if args.probes else load_general_probes()
    )
    ref = resolve_base_model(args.base)
    tokenizer = load_tokenizer(ref)
    probes = general_probe_items(tokenizer, args.system_prompt, probe_set)
    results = base_check(load_model(ref), tokenizer, probes, args.max_new_tokens)
    for row in results:
        print(f"{'PASS' if row['passed'] else 'FAIL'} {row['id']}: {' '.join(row['reply'].split())[:120]!r}")
    failed = [row["id"] for row in results if not row["passed"]]
    print(f"{len(results) - len(failed)}/{len(results)} passed on {args.base} (max_new_tokens {args.max_new_tokens})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

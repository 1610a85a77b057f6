"""Write the replay answers that ship with dlm (`src/dlm/rows/replay-answers.json`):
the base model's own greedy answers to `src/dlm/rows/replay.json`, by the rule of
`dlm.actions.training.replay`, for each base model named.

Run after editing the prompt set or changing the generation rule, then commit the file:

    ATEN_CPU_CAPABILITY=avx2 python scripts/replay-answers.py smollm2-135m
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from dlm.actions.training.replay import MAX_NEW_TOKENS, generate_answers
from dlm.models import load_tokenizer, resolve_base_model
from dlm.rows.replay import load_replay_set

OUT = Path(__file__).resolve().parents[1] / "src" / "dlm" / "rows" / "replay-answers.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bases", nargs="+", help="base model specs (registry aliases)")
    args = parser.parse_args()
    replay = load_replay_set()
    entries = []
    for spec in args.bases:
        ref = resolve_base_model(spec)
        answers = generate_answers(ref, load_tokenizer(ref), replay)
        entries.append(
            {
                "model": ref.revision,
                "name": spec,
                "set": replay.sha256,
                "max_new_tokens": MAX_NEW_TOKENS,
                "answers": answers,
            }
        )
        empty = sum(not a for a in answers)
        print(f"{spec}: {len(answers)} answers ({empty} empty after trimming)")
    OUT.write_text(json.dumps({"format": 1, "entries": entries}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()

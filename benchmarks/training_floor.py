"""What training costs when there is nothing to learn: the floor under a run's general
change and forgotten general probes.

A `.dlm` document whose only pairs are the base model's own greedy answers to general
requests (every tenth prompt of the shipped replay set, `src/dlm/rows/replay.json`, with
its answer from `replay-answers.json`), rendered under a benchmark document's system
prompt, synth off, every other training setting at its default. Whatever the adapter
changes outside those answers is what the recipe's steps cost by themselves: the
general-set NLL change and the general probes the base answers and the adapter no longer
does. A document of `benchmarks/learning/` that forgets no more than this floor forgets
nothing its content caused.

Each seed is one real `dlm train --json` in a fresh temporary `DLM_HOME`, one at a time
(`benchmarks/learning.py`'s environment: offline, no shared cache). The table has one
line per seed; `--reports DIR` keeps each run's record.

    PYTHONPATH=src python benchmarks/training_floor.py [--seeds 42 7] [--fp32] [--set KEY=VALUE] [--reports DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import learning  # noqa: E402  (the sibling benchmark: its environment and settings rules)

ROWS = learning.ROOT / "src" / "dlm" / "rows"
PAIRS = 20  # about as many steps as a benchmark document's run
SYSTEM_PROMPT = "You answer questions about the brackenhold wind station codebase."


def floor_document(seed: int, settings: dict[str, str]) -> str:
    """The null document's text: `PAIRS` replay prompts answered by the base model's
    shipped greedy answers, synth off, `training.seed` and each of `settings` under
    `training:`. The prompts are every tenth from the sixth, so each kind is drawn,
    skipping an empty answer and one with a line a `.dlm` reads as a heading or a code
    fence left open (it would end the section or swallow the pairs after it).

    Raises:
        ValueError: the shipped answers are not one entry with one answer per prompt.
    """
    prompts = json.loads((ROWS / "replay.json").read_text(encoding="utf-8"))["prompts"]
    entries = json.loads((ROWS / "replay-answers.json").read_text(encoding="utf-8"))["entries"]
    if len(entries) != 1 or len(entries[0]["answers"]) != len(prompts):
        raise ValueError("replay-answers.json: expected one entry with one answer per replay prompt")
    answers = entries[0]["answers"]
    whole = [i for i in range(5, len(prompts), 10) if not _breaks_section(answers[i])]
    chosen = whole[:PAIRS]
    extra = "".join(f"  {key}: {value}\n" for key, value in settings.items())
    head = (
        "---\ndlm_id: 01M8JGKT1F1EADZX8QGY9NJK3Z\ndlm_version: 1\nbase_model: smollm2-135m\n"
        f"system_prompt: {SYSTEM_PROMPT}\ntraining:\n  seed: {seed}\n{extra}  synth:\n    enabled: false\n---\n\n"
        "# General answers\n\nThe base model's own answers to general requests.\n\n::instruction::\n\n"
    )
    pairs = "".join(f"### Q\n{prompts[i]['question']}\n\n### A\n{answers[i].strip()}\n\n" for i in chosen)
    return head + pairs


def _breaks_section(answer: str) -> bool:
    lines = answer.splitlines()
    if not answer.strip():
        return True  # an empty answer is not a pair
    unclosed = sum(line.startswith("```") for line in lines) % 2 == 1  # what follows would be code
    return unclosed or any(line.startswith(("#", "::", "---")) for line in lines)


def train_floor(seed: int, fp32: bool, settings: dict[str, str]) -> dict[str, Any]:
    """One `dlm train --json` of the null document at `seed` in a fresh temporary
    `DLM_HOME`: `learning.train_document`'s record (`settings` with the seed), or `error`."""
    with tempfile.TemporaryDirectory(prefix="dlm-floor-") as tmp:
        doc = Path(tmp, "floor.dlm")
        doc.write_text(floor_document(seed, settings), encoding="utf-8")
        return learning.train_document(f"floor-seed-{seed}", doc, Path(tmp), fp32, {**settings, "seed": str(seed)})


def line(record: dict[str, Any]) -> str:
    """One seed's table line: steps, training seconds, general NLL change, general probes
    base -> adapter, the forgotten probes by id, then the flips drawn replies did not confirm."""
    if "error" in record:
        return f"| {record['settings']['seed']} | error: {' '.join(record['error'])[-200:]} | | | | |"
    report = record["report"]
    evaluation = report["evaluation"]
    probes = evaluation["general_probes"]
    change = evaluation["general"]["change_pct"]
    forgotten = ", ".join(f"`{name}`" for name in probes["forgotten"]) or "none"
    tipped = [f"`{name}`" for name in probes.get("flipped", []) if name not in probes["forgotten"]]
    if tipped:  # flips the drawn replies do not confirm (`dlm.judge.forgetting`)
        forgotten += f" (not confirmed: {', '.join(tipped)})"
    return (
        f"| {record['settings']['seed']} | {report['steps']} | {report['train_seconds']:.0f} | "
        f"{change:+.2f}% | {probes['passed']['base']} -> {probes['passed']['adapter']} | {forgotten} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[42, 7], help="training.seed of each run")
    parser.add_argument("--fp32", action="store_true", help="DLM_CPU_BF16=0: `precision: auto` trains in float32")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a training setting")
    parser.add_argument("--reports", type=Path, help="save each run's record here")
    args = parser.parse_args()
    try:
        settings = learning.parse_settings(args.set)
    except ValueError as err:
        parser.error(str(err))
    if "seed" in settings or "synth" in settings:
        parser.error("--set seed/synth: the floor sets them itself (--seeds)")
    if args.reports:
        args.reports.mkdir(parents=True, exist_ok=True)
    lines = ["| seed | steps | train s | general NLL | general probes | forgotten |", "|---|---|---|---|---|---|"]
    for seed in args.seeds:
        record = train_floor(seed, args.fp32, settings)
        if args.reports:
            (args.reports / f"floor-seed-{seed}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        print(f"seed {seed}: {record['wall_seconds']:.0f} s wall", file=sys.stderr, flush=True)
        lines.append(line(record))
    print(learning.machine_line(learning.child_env(Path(tempfile.gettempdir()), args.fp32)))
    print("\n".join(lines))


if __name__ == "__main__":
    main()

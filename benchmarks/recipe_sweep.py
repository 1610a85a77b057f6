"""Which training settings make a document's facts stick: a sweep over `training:` keys
on a document of the shape `docs/evaluation.md` describes (`examples/ferry.dlm`: prose,
five source files, eight Q/A pairs, eight paraphrased probes, four facts that sit only
in the prose or the code).

Each configuration is one real `dlm train --json` in a fresh store (so every run starts
from the base model), which ends with the probe report; this script prints, per
configuration, the training steps, tokens and seconds, and the adapter's passes on the
instruction pairs (as written), the paraphrases, the prose/code-only facts and the
general-ability change. Lines go to stdout and, as JSON, to `--out`.

    python benchmarks/recipe_sweep.py [--only NAME ...] [--out results.jsonl]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "examples" / "ferry.dlm"
PARAPHRASES = 8  # the first eight probes restate the instruction pairs; the rest are prose/code-only facts

ALL_LINEAR = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
CONFIGS: dict[str, dict] = {
    "defaults": {},
    "defaults-fp32": {"precision": "fp32"},
    "dropout0": {"lora_dropout": 0.0},
    "lr8e-4": {"learning_rate": 8e-4},
    "r4": {"lora_r": 4, "lora_alpha": 8},
    "alpha8": {"lora_alpha": 8},
    "attn-only": {"target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"]},
    "attn-only-r16": {"target_modules": ["q_proj", "k_proj", "v_proj", "o_proj"], "lora_r": 16, "lora_alpha": 32},
    "mlp-only": {"target_modules": ["gate_proj", "up_proj", "down_proj"]},
    "synth-values": {"synth": {"enabled": True, "kinds": ["value"], "phrasings": 1, "probe_share": 0.0}},
    "defaults-no-recast": {"recast": False},
    "defaults-fp32-no-recast": {"precision": "fp32", "recast": False},
    "defaults-answer-cloze": {"_answer_cloze": True},
    "no-keep": {"eval": {"keep_best": False}},
    "no-keep-fp32": {"eval": {"keep_best": False}, "precision": "fp32"},
    "no-keep-answer-cloze": {"eval": {"keep_best": False}, "_answer_cloze": True},
    "no-keep-no-recast": {"eval": {"keep_best": False}, "recast": False},
    "no-keep-no-recast-lr7e-4": {"eval": {"keep_best": False}, "recast": False, "learning_rate": 7e-4},
    "no-keep-no-recast-lr5e-4": {"eval": {"keep_best": False}, "recast": False, "learning_rate": 5e-4},
    "no-keep-no-recast-synth": {"eval": {"keep_best": False}, "recast": False, "synth": {"enabled": True}},
    "no-keep-lr7e-4": {"eval": {"keep_best": False}, "learning_rate": 7e-4},
    "no-keep-lr5e-4": {"eval": {"keep_best": False}, "learning_rate": 5e-4},
    "no-keep-prose-cuts": {"eval": {"keep_best": False}, "_prose_cuts": True},
    "no-keep-prose-cuts-answer-cloze": {"eval": {"keep_best": False}, "_prose_cuts": True, "_answer_cloze": True},
    "prose-x10": {"_prose_repeats": 10},
    "prose-tails": {"_prose_tails": (1, 2)},
    "prose-tails-thirds": {"_prose_tails": (1, 3, 2, 3)},
    "prose-tails-thirds-lr7e-4": {"_prose_tails": (1, 3, 2, 3), "learning_rate": 7e-4},
    "prose-x20": {"_prose_repeats": 20},
    "hand-tuned": {"max_steps": 60, "learning_rate": 1e-3, "instruction_share": 0.5, "sequence_len": 256},
    "repeat20": {
        "max_steps": 42,
        "learning_rate": 1e-3,
        "instruction_share": 0.96,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
    },
    "repeat20-recast": {
        "max_steps": 46,
        "learning_rate": 1e-3,
        "instruction_share": 0.965,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
        "_recast": True,
    },
    "all-linear": {
        "max_steps": 60,
        "learning_rate": 1e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
    },
    "all-linear-r16": {
        "max_steps": 60,
        "learning_rate": 1e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
        "lora_r": 16,
        "lora_alpha": 32,
    },
    "all-linear-30": {
        "max_steps": 30,
        "learning_rate": 1e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
    },
    "all-linear-120-lr5e-4": {
        "max_steps": 120,
        "learning_rate": 5e-4,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
    },
    "all-linear-lr2e-3": {
        "max_steps": 60,
        "learning_rate": 2e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
    },
    "all-linear-100": {
        "max_steps": 100,
        "learning_rate": 1e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
    },
    "all-linear-share0.7": {
        "max_steps": 60,
        "learning_rate": 1e-3,
        "instruction_share": 0.7,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
    },
    "all-linear-dropout0": {
        "max_steps": 60,
        "learning_rate": 1e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
        "lora_dropout": 0.0,
    },
    "all-linear-r32": {
        "max_steps": 60,
        "learning_rate": 1e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "target_modules": ALL_LINEAR,
        "lora_r": 32,
        "lora_alpha": 64,
    },
    "attn-r16-100": {
        "max_steps": 100,
        "learning_rate": 1e-3,
        "instruction_share": 0.5,
        "sequence_len": 256,
        "lora_r": 16,
        "lora_alpha": 32,
    },
}


def recast(body: str) -> str:
    """Each prose sentence also as a Q/A pair: the first half of the sentence as a cloze
    question, the whole sentence as the answer."""
    prose = body.split("::instruction::")[0]
    sentences = [
        s.strip() for s in " ".join(line for line in prose.splitlines() if not line.startswith("#")).split(". ")
    ]
    pairs = []
    for sentence in filter(None, sentences):
        words = sentence.rstrip(".").split()
        head = " ".join(words[: max(2, len(words) // 2)])
        pairs.append(f"### Q\nComplete this statement about Ferry: {head} ...\n\n### A\n{sentence.rstrip('.')}.\n")
    return body.replace("::instruction::\n", "::instruction::\n\n" + "\n".join(pairs) + "\n", 1)


def answer_cloze(body: str) -> str:
    """Each instruction answer also as a cloze pair: its first half as the question, the
    whole answer as the answer (the fact asked from its subject, not from one wording)."""
    answers = [block.split("\n\n")[0].strip() for block in body.split("### A\n")[1:]]
    answers = answers[: body.split("::probe::")[0].count("### A\n")]
    pairs = []
    for answer in answers:
        words = answer.rstrip(".").split()
        head = " ".join(words[: max(2, len(words) // 2)])
        pairs.append(f"### Q\nComplete this statement about Ferry: {head} ...\n\n### A\n{answer}\n")
    return body.replace("::instruction::\n", "::instruction::\n\n" + "\n".join(pairs) + "\n", 1)


def prose_cloze(body: str, cuts: tuple[int, ...], tail_only: bool) -> str:
    """Each prose sentence as cloze pairs, cut at each fraction `cuts[2k] / cuts[2k + 1]`
    of its words; the answer is the whole sentence, or with `tail_only` only the words
    after the cut (the fact the sentence ends on)."""
    prose = body.split("::instruction::")[0]
    text = " ".join(line for line in prose.splitlines() if line and not line.startswith("#"))
    pairs = []
    for sentence in filter(None, (s.strip() for s in text.split(". "))):
        words = sentence.rstrip(".").split()
        if len(words) < 4:
            continue
        for num, den in zip(cuts[::2], cuts[1::2], strict=True):
            cut = max(2, num * len(words) // den)
            head, tail = " ".join(words[:cut]), " ".join(words[cut:])
            answer = tail[0].upper() + tail[1:] if tail_only else " ".join(words)
            pairs.append(f"### Q\nComplete this statement about Ferry: {head} ...\n\n### A\n{answer}.\n")
    return body.replace("::instruction::\n", "::instruction::\n\n" + "\n".join(pairs) + "\n", 1)


def prose_repeats(body: str, n: int) -> str:
    """The prose before the first pair `n` times, each copy its own section (a heading
    naming the copy), so the recipe's "the rest once" shows the model the prose `n` times."""
    prose, rest = body.split("::instruction::", 1)
    copies = [prose.replace("# Ferry\n", f"# Ferry, in brief ({k + 1})\n", 1) for k in range(n)]
    return "\n".join(copies) + "::instruction::" + rest


def variant(doc_text: str, overrides: dict, folder: Path) -> Path:
    """The document with `overrides` merged into `training:` and its sources made absolute."""
    _, head, body = doc_text.split("---\n", 2)
    overrides = dict(overrides)
    if overrides.pop("_recast", False):
        body = recast(body)
    if overrides.pop("_answer_cloze", False):
        body = answer_cloze(body)
    if overrides.pop("_prose_cuts", False):  # dlm's own recast cuts in half; these at thirds
        body = prose_cloze(body, (1, 3, 2, 3), tail_only=False)
    if "_prose_tails" in overrides:
        body = prose_cloze(body, overrides.pop("_prose_tails"), tail_only=True)
    if "_prose_repeats" in overrides:
        body = prose_repeats(body, overrides.pop("_prose_repeats"))
    front = yaml.safe_load(head)
    training = front.setdefault("training", {})
    for source in training.get("sources", []):
        source["path"] = str((DOC.parent / source["path"]).resolve())
    training.update(overrides)
    path = folder / "doc.dlm"
    path.write_text("---\n" + yaml.safe_dump(front, sort_keys=False) + "---\n" + body, encoding="utf-8")
    return path


def run(name: str, overrides: dict, home: Path, folder: Path) -> dict:
    doc = variant(DOC.read_text(encoding="utf-8"), overrides, folder)
    env = dict(os.environ, DLM_HOME=str(home))
    store = home / "store"
    if store.exists():
        subprocess.run(["rm", "-rf", str(store)], check=True)  # every configuration from the base model
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "dlm", "train", str(doc), "--json", "--ignore-lock"],
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        return {"name": name, "error": done.stderr.strip().splitlines()[-3:], "wall_s": round(wall, 1)}
    report = json.loads(done.stdout)
    evaluation = report["evaluation"]
    probes = [i for i in evaluation["items"] if i["kind"] == "probe"]
    para, facts = probes[:PARAPHRASES], probes[PARAPHRASES:]
    inst = evaluation["kinds"]["instruction"]
    return {
        "name": name,
        "overrides": overrides,
        "steps": report["steps"],
        "train_tokens": report["train_tokens"],
        "train_s": round(report["train_seconds"], 1),
        "wall_s": round(wall, 1),
        "instruction": f"{inst['passed']['adapter']}/{inst['total']} (base {inst['passed']['base']})",
        "paraphrase": f"{sum(i['passed']['adapter'] for i in para)}/{len(para)} "
        f"(base {sum(i['passed']['base'] for i in para)}, null {sum(i['passed']['null'] for i in para)})",
        "prose_code": f"{sum(i['passed']['adapter'] for i in facts)}/{len(facts)}",
        "general_change_pct": evaluation["general"]["change_pct"] if evaluation["general"] else None,
        "failed": [i["question"] + " -> " + i["replies"]["adapter"][:80] for i in probes if not i["passed"]["adapter"]],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="*", help="configuration names (default: all)")
    parser.add_argument("--out", type=Path, help="append one JSON line per configuration")
    args = parser.parse_args()
    names = args.only or list(CONFIGS)
    home = Path(os.environ.get("SWEEP_HOME") or tempfile.mkdtemp(prefix="dlm-sweep-"))
    for name in names:
        with tempfile.TemporaryDirectory() as folder:
            result = run(name, CONFIGS[name], home, Path(folder))
        print(json.dumps({k: v for k, v in result.items() if k != "failed"}), flush=True)
        if args.out:
            with args.out.open("a", encoding="utf-8") as out:
                out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()

"""Padding of the training micro-batches, by batching rule, without training.

For each document the run's examples and steps are built as `dlm train` builds them
(`dlm.actions.training.plan.prepare` in a temporary `DLM_HOME`, the section cache
bypassed: the tokenizer only, no model), then the loop's schedule is replayed: every
micro-batch of every optimizer step, `B` examples padded to a width `n`. Per document,
layout and rule the table gives the padding share of the processed tokens (`B * n`,
what `collate` builds), the loss-carrying share, the distinct widths (shapes), and
the micro-batches that hold two copies of one repeated example (`dup`).

Layouts: `recipe` is what `dlm train` trains (the recipe may fall back from packed
blocks to one example per row); `num_epochs 1` is the same document with `training.num_epochs:
1`, which keeps `packing: true` (the default), so a document that sets its epochs
trains blocks.

Rules: `dlm` is `dlm.train.data` itself (`Schedule`, `padded_length`). The others are
this script's model of the ordering (module docstring of `dlm.train.data`) with three
knobs, the smallest width step, the micro-batches sorted together (`epoch`: all of an
epoch's) and whether equal widths are sorted by sighting so copies stay apart
(`apart`); the model of `dlm`'s rule is checked against `Schedule` micro-batch by
micro-batch before anything is printed.

    PYTHONPATH=src python benchmarks/padding.py [DOC.dlm ...]

Default documents: `benchmarks/learning/*/*.dlm` and `examples/ferry.dlm`
(`examples/stdlib.dlm` walks `$DLM_STDLIB`: pass it by path). The base model's tokenizer
comes from `$DLM_MODELS_DIR`, else the current `DLM_HOME`'s models.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DOCS = [*sorted((ROOT / "benchmarks" / "learning").glob("*/*.dlm")), ROOT / "examples" / "ferry.dlm"]


@dataclass(frozen=True)
class Rule:
    """A batching rule: widths are multiples of `max(min_step, 2 ** floor(log2 n) / 8)`;
    `group` micro-batches of an epoch's permutation are sorted together (None: the whole
    epoch); `apart`: equal widths ordered by sighting of their original."""

    name: str
    min_step: int
    group: int | None
    apart: bool = False


RULES = [
    Rule("step16-group32", 16, 32),
    Rule("step8-group32", 8, 32),
    Rule("step8-group64", 8, 64),
    Rule("step8-group128", 8, 128),
    Rule("step16-epoch", 16, None),
    Rule("step8-epoch", 8, None),
    Rule("step8-epoch-apart", 8, None, apart=True),
]
DLM_RULE = "step8-epoch-apart"  # the rule `dlm.train.data` implements (checked by `check_model`)


def width(n: int, limit: int | None, rule: Rule) -> int:
    """`n` rounded up to a multiple of `max(rule.min_step, 2 ** floor(log2 n) / 8)`, at
    most `max(n, limit)`."""
    step = max(rule.min_step, (1 << max(int(n).bit_length() - 1, 0)) // 8)
    rounded = -(-int(n) // step) * step
    return max(int(n), min(rounded, limit)) if limit is not None else rounded


def epoch_batches(replay: Replay, e: int, rule: Rule) -> list:
    """Epoch `e`'s micro-batches under `rule`: the permutation cut into groups, each
    sorted by width (stable; then by sighting under `apart`), cut into micro-batches, and
    those shuffled."""
    from dlm.train.data import sightings

    lengths, micro_batch, limit = replay.lengths, replay.micro_batch, replay.limit
    rng = np.random.default_rng([replay.seed, e])
    order = rng.permutation(len(lengths))
    size = micro_batch * rule.group if rule.group is not None else len(order)
    batches: list[np.ndarray] = []
    for start in range(0, len(order), size):
        group = order[start : start + size]
        widths = np.fromiter((width(int(n), limit, rule) for n in lengths[group]), dtype=np.int64)
        if rule.apart:
            group = group[np.lexsort((sightings(replay.originals[group]), widths))]
        else:
            group = group[np.argsort(widths, kind="stable")]
        cut = [group[i : i + micro_batch] for i in range(0, len(group), micro_batch)]
        batches += [cut[i] for i in rng.permutation(len(cut))]
    return batches


@dataclass(frozen=True)
class Replay:
    """One layout of one run: what the schedule is built from."""

    lengths: np.ndarray
    loss_tokens: np.ndarray
    originals: np.ndarray
    micro_batch: int
    accumulation: int
    seed: int
    limit: int
    steps: int
    layout: str


def replay_of(run: Any, layout: str) -> Replay:
    """The schedule's inputs and the run's optimizer steps, as the loop takes them
    (`dlm.train.loop._set_up`: one rank)."""
    from dlm.train.data import epoch_steps

    hyper, dataset = run.hyper, run.dataset
    steps = hyper.max_steps or epoch_steps(
        len(dataset), hyper.batch_size, hyper.gradient_accumulation_steps, hyper.num_epochs
    )
    kind = "packed" if hasattr(dataset, "order") else "windows"
    return Replay(
        dataset.lengths,
        dataset.loss_tokens,
        dataset.originals,
        hyper.batch_size,
        hyper.gradient_accumulation_steps,
        hyper.seed,
        run.doc.frontmatter.training.sequence_len,
        steps,
        f"{layout} ({kind})",
    )


def micro_batches(replay: Replay, rule: Rule) -> list[np.ndarray]:
    """Every micro-batch the run trains, in order, under `rule`."""
    per_epoch = -(-len(replay.lengths) // replay.micro_batch)
    epochs: dict[int, list[np.ndarray]] = {}
    out = []
    for j in range(replay.steps * replay.accumulation):
        e = j // per_epoch
        if e not in epochs:
            epochs = {e: epoch_batches(replay, e, rule)}
        out.append(epochs[e][j % per_epoch])
    return out


def check_model(replay: Replay) -> None:
    """Fail unless this script's model of `DLM_RULE` is `dlm.train.data`'s rule: the same
    micro-batches and widths."""
    from dlm.train.data import Schedule, padded_length

    schedule = Schedule(
        replay.lengths,
        replay.loss_tokens,
        replay.micro_batch,
        replay.accumulation,
        1,
        replay.seed,
        replay.limit,
        replay.originals,
    )
    rule = next(r for r in RULES if r.name == DLM_RULE)
    for j, batch in enumerate(micro_batches(replay, rule)):
        theirs = schedule.micro_batch_at(j)
        n = int(replay.lengths[batch].max())
        if not np.array_equal(batch, theirs) or width(n, replay.limit, rule) != padded_length(n, replay.limit):
            sys.exit(f"{DLM_RULE} is not dlm.train.data's rule (micro-batch {j}): update DLM_RULE or RULES")


def shares(replay: Replay, rule: Rule) -> tuple[float, float, int, int]:
    """(padding share, loss-carrying share, distinct widths) of the processed tokens, and
    the micro-batches holding two copies of one example."""
    processed = real = loss = dup = 0
    widths = set()
    for batch in micro_batches(replay, rule):
        n = width(int(replay.lengths[batch].max()), replay.limit, rule)
        widths.add(n)
        processed += len(batch) * n
        real += int(replay.lengths[batch].sum())
        loss += int(replay.loss_tokens[batch].sum())
        dup += len(np.unique(replay.originals[batch])) < len(batch)
    return 1 - real / processed, loss / processed, len(widths), dup


def prepared(path: Path, epochs: float | None) -> Any:
    """`prepare` of the document at `path` as `dlm train` runs it on one rank (as `dlm
    train --dry-run` does), `training.num_epochs` replaced when `epochs` is set."""
    from dlm.actions.common import open_document
    from dlm.actions.training.plan import RankSide, prepare, resolve_base
    from dlm.actions.training.ranks import check_agreement, rank_entry
    from dlm.actions.training.types import DEFAULT_OPTIONS, NullSink
    from dlm.train.distributed import RankGroup, RankInfo, make_plan

    doc, store = open_document(path)
    if epochs is not None:
        training = doc.frontmatter.training.model_copy(update={"num_epochs": epochs, "max_steps": None})
        doc = replace(doc, frontmatter=doc.frontmatter.model_copy(update={"training": training}))
    training = doc.frontmatter.training
    info = RankInfo.from_env()
    plan = make_plan(1, training.batch_size, training.gradient_accumulation_steps, "cpu")
    side = RankSide(
        RankGroup(info, plan.device), plan, "padding", check_agreement, lambda s, w, r: rank_entry(info, s, w, r)
    )
    return prepare(
        doc, store, resolve_base(doc), replace(DEFAULT_OPTIONS, use_cache=False, resume=False), NullSink(), side
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("docs", nargs="*", type=Path, default=DEFAULT_DOCS)
    args = parser.parse_args()
    names = [r.name + (" (dlm)" if r.name == DLM_RULE else "") for r in RULES]
    print("padding / loss-carrying share of processed tokens (widths) dup, by rule")
    print("| doc | layout | steps | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(RULES))
    from dlm.paths import models_dir

    os.environ["DLM_MODELS_DIR"] = str(models_dir())  # the base models where this process finds them
    with tempfile.TemporaryDirectory(prefix="dlm-padding-") as home:
        os.environ["DLM_HOME"] = home
        for path in args.docs:
            recipe = replay_of(prepared(path, None), "recipe")
            layouts = [recipe]
            if "packed" not in recipe.layout:
                layouts.append(replay_of(prepared(path, 1.0), "num_epochs 1"))
            for replay in layouts:
                check_model(replay)
                cells = [shares(replay, rule) for rule in RULES]
                row = " | ".join(f"{p:.1%} / {lo:.1%} ({w}) {d}" for p, lo, w, d in cells)
                print(f"| {path.stem} | {replay.layout} | {replay.steps} | {row} |", flush=True)


if __name__ == "__main__":
    main()

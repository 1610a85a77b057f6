"""`training.synth` on examples/stdlib.dlm: what drawing the Q/A pairs costs a run.

    PYTHONPATH=src HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/synth.py [--repeats 3]

Walks the example's sources once, then times, median of `--repeats`:

- facts, cold: read every wanted file and parse it with `ast` (an empty facts memo);
- facts, warm: read and hash every wanted file, facts from the memo (every later run);
- pairs: `synthesize` (uniqueness, hash sample, probe split, phrasings);
- render, cold / warm: the chat template of every training pair through the base
  model's deferred tokenizer, with an empty render memo / the memo a run leaves.

beside the walk itself, and prints the ratios to it. Run it on a quiet machine: other
processes disturb the absolute numbers, less their ratios.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--doc", type=Path, default=REPO / "examples" / "stdlib.dlm")
    args = parser.parse_args()
    os.environ["DLM_HOME"] = home = tempfile.mkdtemp(prefix="dlm-synth-bench-")

    from dlm.doc import load_document
    from dlm.models import resolve_base_model
    from dlm.rows.build import render_instruction
    from dlm.rows.synth import synthesize, wanted_file
    from dlm.rows.synthmemo import FactMemo, source_facts
    from dlm.rows.walk import walk_sources
    from dlm.tokenize.deferred import deferred_tokenizer

    doc = load_document(args.doc)
    training = doc.frontmatter.training
    cfg = training.synth
    walk_s, walk = timed(lambda: walk_sources(training.sources, args.doc.parent), args.repeats)
    files = walk.files  # type: ignore[attr-defined]
    wanted = sum(wanted_file(f.relpath) for f in files)
    memo_path = Path(home) / "facts.json"

    def cold() -> list:
        memo_path.unlink(missing_ok=True)
        return source_facts(files, FactMemo(memo_path))

    cold_s, facts = timed(cold, args.repeats)
    warm_s, _ = timed(lambda: source_facts(files, FactMemo(memo_path)), args.repeats)
    kwargs = dict(kinds=cfg.kinds, phrasings=cfg.phrasings, probe_share=cfg.probe_share, max_facts=cfg.max_facts)
    pairs_s, drawn = timed(lambda: synthesize(facts, **kwargs), args.repeats)  # type: ignore[arg-type]
    ref = resolve_base_model(doc.frontmatter.base_model, relative_to=args.doc.parent)
    train = drawn.train  # type: ignore[attr-defined]

    def render() -> None:
        tokenizer, _ = deferred_tokenizer(ref)
        tokenizer.load()  # not timed below: a cold run loads it anyway
        start = time.perf_counter()
        for _, pair in train:
            render_instruction(tokenizer, doc.frontmatter.system_prompt, pair.question, pair.answer)
        tokenizer.save()
        return time.perf_counter() - start

    render_dir = Path(home) / "chat-renders"
    cold_render = []
    for _ in range(args.repeats):
        for stale in render_dir.glob("*.json"):
            stale.unlink()
        cold_render.append(render())
    warm_render = statistics.median(render() for _ in range(args.repeats))
    cold_render_s = statistics.median(cold_render)

    print(
        f"{len(files)} files walked, {wanted} wanted by synth, {len(facts)} facts "  # type: ignore[arg-type]
        f"-> {drawn.facts} kept, {len(train)} training pairs, {len(drawn.probes)} probes\n"
    )  # type: ignore[attr-defined]
    print("| step | seconds | / walk |")
    print("|---|---|---|")
    for name, s in [
        ("walk", walk_s),
        ("facts, cold (read + ast)", cold_s),
        ("facts, warm (read + hash, memo)", warm_s),
        ("pairs (synthesize)", pairs_s),
        ("render, cold", cold_render_s),
        ("render, warm (memo)", warm_render),
    ]:
        print(f"| {name} | {s:.3f} | {s / walk_s:.1f}x |")


if __name__ == "__main__":
    main()

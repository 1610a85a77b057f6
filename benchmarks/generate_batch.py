"""The probe report's answer pass at several generation batch sizes, side by side
(docs/benchmarks.md, "Probe report: generation batch").

SmolLM2-135M in float32 (the report answers in float32 on every machine) with a LoRA
adapter on the MLP (random `lora_B`, so its rows differ from the base's) and its null
adapter. Two workloads, each the report's own: every question asked of the base, the
adapter and the null adapter, greedily (`QUESTIONS` document questions and the shipped
general probes), and 16 drawn replies of the base and of the adapter to three general
probes (what confirming three flips draws). Each size's pass is timed in turn, rounds
interleaved, and its peak resident memory over the loaded model is read from the
kernel's high-water mark (reset before each pass). Printed: seconds, the ratio to
batches of 16 rows, the peak, and how many replies differ from the 16-row batches'.

    PYTHONPATH=src DLM_MODELS_DIR=.dlm-test-models HF_HUB_OFFLINE=1 \\
        .venv/bin/python benchmarks/generate_batch.py [--sizes 16 64 96] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model

from dlm.judge.forgetting import general_probe_items
from dlm.judge.general import load_general_probes
from dlm.judge.null import NULL_ADAPTER, add_null_adapter
from dlm.judge.score import BASE, Sampling, greedy_rows, make_item
from dlm.models import load_model, load_tokenizer, resolve_base_model

SYSTEM = "You answer questions about Brackenhold, a tide-table service, briefly and exactly."
QUESTIONS = [
    "Which port does the tide server listen on?",
    "Where does Brackenhold keep its station list?",
    "Which function computes the next high water?",
    "How often are the gauges polled, in seconds?",
    "Who maintains Brackenhold?",
    "Which command rebuilds the harmonic tables?",
    "What unit are heights stored in?",
    "Which file configures the alert thresholds?",
]
MAX_NEW_TOKENS = 48
SAMPLES = 16


def _peak_rss_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS (Linux)


def _rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _workloads(tokenizer: object) -> dict[str, tuple[list[tuple[str, str]], Sampling | None]]:
    probes = general_probe_items(tokenizer, SYSTEM, load_general_probes())
    prompts = [make_item(tokenizer, SYSTEM, "probe", q, "x").prompt_text for q in QUESTIONS]
    prompts += [item.prompt_text for item in probes.items]
    greedy = [(p, a) for p in prompts for a in (BASE, "default", NULL_ADAPTER)]
    flips = [item.prompt_text for item in probes.items[:3]]
    drawn = [(p, a) for p in flips for a in (BASE, "default") for _ in range(SAMPLES)]
    return {"greedy, 3 models": (greedy, None), "drawn, 3 flips": (drawn, Sampling(1.0, 1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 96])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    ref = resolve_base_model("smollm2-135m")
    tokenizer = load_tokenizer(ref)
    config = LoraConfig(r=16, lora_alpha=32, target_modules=["gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(load_model(ref), config)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.02)
    add_null_adapter(model, seed=1)
    loaded = _rss_kb("VmRSS")
    for label, (rows, sampling) in _workloads(tokenizer).items():
        seconds: dict[int, list[float]] = {n: [] for n in args.sizes}
        peaks: dict[int, int] = {}
        replies: dict[int, list[str]] = {}
        for _ in range(args.rounds):
            for n in args.sizes:
                _peak_rss_reset()
                start = time.perf_counter()
                replies[n] = greedy_rows(model, tokenizer, rows, MAX_NEW_TOKENS, sampling, batch=n)
                seconds[n].append(time.perf_counter() - start)
                peaks[n] = max(peaks.get(n, 0), _rss_kb("VmHWM") - loaded)
        first = args.sizes[0]
        print(f"{label}: {len(rows)} rows x {MAX_NEW_TOKENS} new tokens, {args.rounds} rounds")
        print(
            f"| rows a batch | seconds (median) | x {first} rows | peak over the model | replies unlike {first} rows' |"
        )
        print("|---|---|---|---|---|")
        for n in args.sizes:
            mid = statistics.median(seconds[n])
            ratio = mid / statistics.median(seconds[first])
            unlike = sum(a != b for a, b in zip(replies[n], replies[first], strict=True))
            print(f"| {n} | {mid:.1f} | {ratio:.2f}x | {peaks[n] / 1024**2:.2f} GB | {unlike} of {len(rows)} |")
        print()


if __name__ == "__main__":
    main()

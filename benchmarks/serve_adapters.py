"""What serving many documents over one base model costs: memory per extra adapter, and
the cost of switching adapters between requests.

    .venv/bin/python benchmarks/serve_adapters.py [--adapters 4] [--repeats 5] [--new-tokens 16]

Loads the real SmolLM2-135M-Instruct once and attaches `--adapters` LoRA adapters of
`dlm train`'s default shape (`training:` defaults: r 8, alpha 16 on every linear layer,
random weights)
as peft named adapters, the way `dlm serve A.dlm B.dlm ...` does
(`dlm.infer.adapters.attach_adapter`). Prints, per adapter, its parameter bytes and
the growth of the process's resident memory; then the median latency of one greedy
request (the server's own decoding loop, `TorchEngine.generate_ids`) with one
adapter, timed after a request for the same adapter (no switch) and after one for
another (the switch is paid first), beside the base model alone; plus the cost of
`set_adapter` alone. Compare runs of one sitting: other processes on the
machine slow every pattern alike (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def make_adapter(base_path: Path, folder: Path, seed: int) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_pretrained(base_path)
    from dlm.doc.schema import TrainingConfig

    defaults = TrainingConfig()  # the shape `dlm train` gives an adapter by default
    config = LoraConfig(
        r=defaults.lora_r,
        lora_alpha=defaults.lora_alpha,
        target_modules=list(defaults.target_modules),
        init_lora_weights=False,
    )
    get_peft_model(model, config).save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapters", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--new-tokens", type=int, default=16)
    args = parser.parse_args()

    import torch

    from dlm.infer.adapters import attach_adapter
    from dlm.infer.decode import Sampling, TorchEngine
    from dlm.models import load_model, load_tokenizer, resolve_base_model

    torch.manual_seed(0)
    ref = resolve_base_model("smollm2-135m")
    tokenizer = load_tokenizer(ref)
    with tempfile.TemporaryDirectory() as tmp:
        folders = []
        for i in range(args.adapters):
            folders.append(Path(tmp) / f"a{i}")
            make_adapter(ref.path, folders[-1], seed=i)
        before = rss_bytes()
        model = load_model(ref).eval()
        base_rss = rss_bytes() - before
        base_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
        rows = []
        for i, folder in enumerate(folders):
            before = rss_bytes()
            model = attach_adapter(model, folder, f"a{i}")
            grown = rss_bytes() - before
            own = sum(p.numel() * p.element_size() for n, p in model.named_parameters() if f".a{i}." in n)
            rows.append((f"a{i}", own, grown))
        model.eval()

    print(f"load average: {os.getloadavg()[0]:.1f}; torch threads: {torch.get_num_threads()}")
    print(f"base model: {base_bytes / 2**20:.1f} MiB of parameters, resident +{base_rss / 2**20:.1f} MiB")
    print("| adapter | parameter MiB | resident growth MiB | share of the base's parameters |")
    print("|---|---|---|---|")
    for name, own, grown in rows:
        print(f"| {name} | {own / 2**20:.2f} | {grown / 2**20:.2f} | {own / base_bytes:.2%} |")
    n = args.adapters
    per = statistics.median(r[1] for r in rows)
    print(f"{n} documents: one server per document holds {n} x {base_bytes / 2**20:.0f} MiB = "
          f"{n * base_bytes / 2**20:.0f} MiB of parameters; one shared base: "
          f"{(base_bytes + n * per) / 2**20:.0f} MiB ({n * base_bytes / (base_bytes + n * per):.1f}x less)")  # fmt: skip

    engine = TorchEngine(type("Loaded", (), {"model": model, "tokenizer": tokenizer})())
    text = tokenizer.apply_chat_template(
        [
            {"role": "system", "content": "Answer briefly."},
            {"role": "user", "content": "Name three colours of the sea."},
        ],
        tokenize=False,
        add_generation_prompt=True,
    )
    prompt = tokenizer.encode(text, add_special_tokens=False)

    def request(adapter: str | None) -> tuple[float, int]:
        started = time.perf_counter()
        ids = list(engine.generate_ids(prompt, max_new_tokens=args.new_tokens, sampling=Sampling(), adapter=adapter))
        return time.perf_counter() - started, len(ids)

    request("a1")  # first-call costs
    # The same request (adapter a1) timed in three settings: after a1 (no switch),
    # after a0 (a switch first), and the base model alone for scale.
    timings: dict[str, list[float]] = {
        "base model alone": [],
        "a1 after a1 (no switch)": [],
        "a1 after a0 (switch)": [],
    }
    n_ids = 0
    for _ in range(args.repeats * 2):  # interleaved, so the machine's load hits them alike
        timings["base model alone"].append(request(None)[0])
        request("a1")
        seconds, n_ids = request("a1")
        timings["a1 after a1 (no switch)"].append(seconds)
        request("a0")
        timings["a1 after a0 (switch)"].append(request("a1")[0])
    same = statistics.median(timings["a1 after a1 (no switch)"])
    print(f"\nprompt {len(prompt)} ids, {n_ids} new ids (greedy); median of {args.repeats * 2}")
    print("| request | ms | vs no switch |")
    print("|---|---|---|")
    for name, values in timings.items():
        median = statistics.median(values)
        print(f"| {name} | {median * 1000:.1f} | {median / same:.3f}x |")
    switch = []
    for i in range(200):
        started = time.perf_counter()
        model.set_adapter(f"a{i % n}")
        switch.append(time.perf_counter() - started)
    print(f"set_adapter alone: {statistics.median(switch) * 1e6:.0f} us (median of 200)")


if __name__ == "__main__":
    main()

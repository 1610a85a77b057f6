"""What chunked prefill costs: the time of one prompt's prefill in chunks of N ids
against one forward pass over the whole prompt, and how long a cancelled prefill keeps
the model (at most one chunk).

    .venv/bin/python benchmarks/prefill_chunks.py [--prompt-ids 2048] [--chunks 128,256,512,0] [--repeats 3]

Loads the real SmolLM2-135M-Instruct and runs `TorchEngine.prefill` (the server's and
`dlm prompt`'s own prefill, `dlm.infer.decode`) over a prompt of `--prompt-ids` ids;
chunk 0 means the whole prompt in one pass. Prints the median seconds per prefill and
per chunk. Compare runs of one sitting: other processes on the machine slow every
pattern alike (the load average is printed).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-ids", type=int, default=2048)
    parser.add_argument("--chunks", default="128,256,512,0")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    import torch

    from dlm.infer.decode import TorchEngine
    from dlm.models import load_model, load_tokenizer, resolve_base_model

    ref = resolve_base_model("smollm2-135m")
    model, tokenizer = load_model(ref).eval(), load_tokenizer(ref)
    text = " ".join(f"Item {i} is a box." for i in range(args.prompt_ids))
    ids = tokenizer.encode(text, add_special_tokens=False)[: args.prompt_ids]
    print(f"torch threads {torch.get_num_threads()}, load average {os.getloadavg()[0]:.2f}, prompt {len(ids)} ids")
    for chunk in (int(c) for c in args.chunks.split(",")):
        size = chunk or len(ids)
        engine = TorchEngine(SimpleNamespace(model=model, tokenizer=tokenizer), prefill_chunk=size)
        engine.prefill(ids[:size])  # warm-up
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            engine.prefill(ids)
            times.append(time.perf_counter() - start)
        seconds = statistics.median(times)
        n_chunks = -(-len(ids) // size)
        print(f"chunk {chunk or 'whole':>5}: {seconds:6.2f} s per prefill, {seconds / n_chunks:6.3f} s per chunk")


if __name__ == "__main__":
    main()

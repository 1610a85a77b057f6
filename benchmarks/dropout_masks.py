"""Keyed LoRA dropout masks on a CPU: `torch.rand` (MT19937, one 32-bit draw per element)
against `dlm.train.dropout.keep_mask` (NumPy SFC64, one 16-bit draw per element), first
the masks alone, then whole LoRA training steps of SmolLM2-135M with each.

Masks: the 210 dropout calls of one step of the demo's shape (4 x 128 tokens, LoRA on
every linear layer of 30 layers: six inputs of 576 features and one of 1536 per layer),
forward and backward of `x * keep / share`. Steps: the embedded SmolLM2-135M with peft
LoRA (r 8, alpha 16, dropout 0.05, every linear layer) and `install_keyed_dropout`,
AdamW, forward + backward + step on random ids, under bf16 autocast and in fp32, the two
mask generators interleaved in one process. Prints seconds per step and the ratios.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/dropout_masks.py [--steps 4] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

import dlm.train.dropout as dropout
from dlm.train.dropout import keep_mask

P = 0.05
SHAPES = [(4, 128, 576)] * 6 + [(4, 128, 1536)]
LAYERS = 30


def torch_rand_mask(shape: Any, p: float, key: int, device: torch.device) -> tuple[torch.Tensor, float]:
    """The mask `KeyedDropout` drew before `keep_mask`: `torch.rand(...) >= p`."""
    generator = torch.Generator(device=device)
    generator.manual_seed(key)
    return torch.rand(shape, generator=generator, device=device) >= p, 1.0 - p


MASKS: dict[str, Callable[..., tuple[torch.Tensor, float]]] = {"torch.rand": torch_rand_mask, "sfc64-u16": keep_mask}


def masks_alone(make: Callable[..., tuple[torch.Tensor, float]]) -> float:
    """Seconds for one step's dropout calls, forward and backward."""
    xs = [torch.randn(s, requires_grad=True) for s in SHAPES]
    started = time.perf_counter()
    for layer in range(LAYERS):
        for i, x in enumerate(xs):
            keep, share = make(x.shape, P, layer * 7 + i, x.device)
            (x * keep / share).sum().backward()
    return time.perf_counter() - started


def lora_steps(steps: int, precision: str) -> float:
    """Mean seconds of `steps` LoRA steps (after one warm-up step) with the mask
    generator currently installed in `dlm.train.dropout`."""
    from peft import LoraConfig, get_peft_model

    from dlm.models import load_model, resolve_base_model
    from dlm.train.dropout import MicroBatchClock, install_keyed_dropout

    model = load_model(resolve_base_model("smollm2-135m"))
    model.config.use_cache = False
    targets = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=P, target_modules=targets))
    clock = MicroBatchClock()
    install_keyed_dropout(model, seed=1, clock=clock)
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    generator = torch.Generator().manual_seed(0)
    times = []
    for step in range(steps + 1):
        ids = torch.randint(3, 40000, (4, 128), generator=generator)
        clock.tick()
        started = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if step:
            times.append(time.perf_counter() - started)
    return statistics.mean(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    alone: dict[str, list[float]] = {name: [] for name in MASKS}
    for round_ in range(args.rounds * 3):
        for name in MASKS if round_ % 2 == 0 else reversed(list(MASKS)):
            alone[name].append(masks_alone(MASKS[name]))
    old, new = (statistics.median(alone[name]) for name in MASKS)
    print(f"one step's masks, forward + backward: torch.rand {old:.3f} s, sfc64-u16 {new:.3f} s ({old / new:.2f}x)")
    original = dropout.keep_mask
    for precision in ("bf16", "fp32"):
        step: dict[str, list[float]] = {name: [] for name in MASKS}
        for round_ in range(args.rounds):
            for name in MASKS if round_ % 2 == 0 else reversed(list(MASKS)):
                dropout.keep_mask = MASKS[name]
                try:
                    step[name].append(lora_steps(args.steps, precision))
                finally:
                    dropout.keep_mask = original
        old, new = (statistics.mean(step[name]) for name in MASKS)
        print(f"{precision} LoRA step: torch.rand {old:.3f} s, sfc64-u16 {new:.3f} s ({old / new:.2f}x)")


if __name__ == "__main__":
    main()

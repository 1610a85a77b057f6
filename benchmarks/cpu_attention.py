"""Attention under the CPU's bfloat16 autocast: torch's kernel in bfloat16 against the
same kernel in float32 (`dlm.train.attention`), first one layer's attention alone, then
whole LoRA training steps of SmolLM2-135M with each.

Attention: `scaled_dot_product_attention` forward and backward at one layer of the
demo's shape (4 x 128 tokens, 9 heads of 64), causal and with a block mask (packed
rows), per backend (flash, math) and dtype; then the flash kernel with a block mask at
each of `--lengths` tokens a row, where the dtype that is faster changes; then float32
masked attention with SmolLM2's 3 key/value heads repeated for its 9 query heads (what
transformers does when a mask is given) against left grouped (`enable_gqa`). Steps: the embedded SmolLM2-135M with peft
LoRA (r 8, alpha 16, every linear layer), frozen linears held in bfloat16 as `dlm
train` holds them, AdamW, forward + backward + step on random ids packed as two
examples per row, under bf16 autocast, transformers' `sdpa` against the float32
wrapper, interleaved in one process. Prints milliseconds, seconds per step and the ratio.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/cpu_attention.py [--steps 4] [--lengths 128,512,2048]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

B, H, T, D = 4, 9, 128, 64


def attention_ms(backend: SDPBackend, dtype: torch.dtype, masked: bool, n: int = 30, t: int = T) -> float:
    """Milliseconds per forward + backward of one layer's attention over `t` tokens a row."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, t, D, generator=g, dtype=dtype).requires_grad_() for _ in range(3))
    mask = torch.ones(t, t, dtype=torch.bool).tril()[None, None].expand(B, 1, t, t) if masked else None

    def once() -> None:
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=not masked)
        out.sum().backward()

    with sdpa_kernel([backend]):
        return timed_ms(once, n)


def timed_ms(once: Any, n: int) -> float:
    """Milliseconds per call of `once` over `n` calls, after 3 to warm up."""
    for _ in range(3):
        once()
    start = time.perf_counter()
    for _ in range(n):
        once()
    return (time.perf_counter() - start) / n * 1000


def grouped_ms(grouped: bool, n: int = 30, kv_heads: int = 3) -> float:
    """Milliseconds per float32 forward + backward of one layer's masked attention with
    `kv_heads` key/value heads for H query heads: repeated to H first, as transformers
    does when a mask is given, or left grouped (`enable_gqa`, `dlm.train.attention`)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(B, H, T, D, generator=g).requires_grad_()
    k, v = (torch.randn(B, kv_heads, T, D, generator=g).requires_grad_() for _ in range(2))
    mask = torch.ones(T, T, dtype=torch.bool).tril()[None, None].expand(B, 1, T, T)

    def repeated(x: torch.Tensor) -> torch.Tensor:
        return x[:, :, None].expand(B, kv_heads, H // kv_heads, T, D).reshape(B, H, T, D)

    def once() -> None:
        if grouped:
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        else:
            out = torch.nn.functional.scaled_dot_product_attention(q, repeated(k), repeated(v), attn_mask=mask)
        out.sum().backward()

    return timed_ms(once, n)


def lora_model(float32_attention: bool) -> tuple[Any, Any]:
    from peft import LoraConfig, get_peft_model

    from dlm.doc.schema import ALL_LINEAR
    from dlm.models import load_model, resolve_base_model
    from dlm.train.attention import use_dlm_attention
    from dlm.train.precision import hold_frozen_weights

    model = load_model(resolve_base_model("smollm2-135m"))
    model.config.use_cache = False
    model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=list(ALL_LINEAR)))
    hold_frozen_weights(model, "bfloat16")
    if float32_attention:
        use_dlm_attention(model)  # this model alone; a model beside it keeps transformers' sdpa
    model.train()
    return model, torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument(
        "--lengths", default="128,512,2048", help="tokens a row for the flash kernel by length (block mask)"
    )
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )
    for masked in (False, True):
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.MATH):
            row = {
                str(dtype).removeprefix("torch."): attention_ms(backend, dtype, masked)
                for dtype in (torch.bfloat16, torch.float32)
            }
            print(
                f"attention {'block mask' if masked else 'causal':10s} {backend.name:15s} "
                + "  ".join(f"{k} {v:.2f} ms" for k, v in row.items())
                + f"  bf16/fp32 {row['bfloat16'] / row['float32']:.2f}x"
            )
    # where bfloat16 catches up (`dlm.train.attention.FLOAT32_BELOW`): flash kernel, block mask
    for t in (int(x) for x in args.lengths.split(",")):
        n = max(3, 30 * T // t)
        bf16, fp32 = (attention_ms(SDPBackend.FLASH_ATTENTION, d, True, n, t) for d in (torch.bfloat16, torch.float32))
        print(
            f"attention {B} x {t:<5d} flash, block mask  bfloat16 {bf16:.1f} ms  float32 {fp32:.1f} ms  bf16/fp32 {bf16 / fp32:.2f}x"
        )
    rows = [(grouped_ms(False), grouped_ms(True)) for _ in range(3)]  # interleaved
    repeat, grouped = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
    print(
        f"attention {B} x {T} float32, block mask, 3 key/value heads for {H}: repeated {repeat:.2f} ms  "
        f"grouped (enable_gqa) {grouped:.2f} ms  grouped/repeated {grouped / repeat:.2f}x"
    )
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 40000, (B, T), generator=g)
    positions = torch.cat([torch.arange(T // 2), torch.arange(T // 2)]).expand(B, T)  # two packed examples a row
    sides = {"bf16 attention": lora_model(False), "fp32 attention": lora_model(True)}
    times: dict[str, list[float]] = {name: [] for name in sides}
    for step in range(args.steps + 1):
        for name, (model, opt) in sides.items():
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids, position_ids=positions).loss
            loss.backward()
            opt.step()
            opt.zero_grad()
            if step:  # the first step of each warms up
                times[name].append(time.perf_counter() - start)
            else:
                print(f"{name}: first-step loss {loss.item():.4f}")
    median = {name: statistics.median(t) for name, t in times.items()}
    for name, value in median.items():
        print(f"LoRA step, {name}: {value:.3f} s (median of {args.steps})")
    print(f"fp32 attention / bf16 attention step time: {median['fp32 attention'] / median['bf16 attention']:.2f}x")


if __name__ == "__main__":
    main()

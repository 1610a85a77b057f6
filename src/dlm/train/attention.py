"""Attention in float32 while the CPU's bfloat16 autocast is on.

Under `torch.autocast("cpu", dtype=torch.bfloat16)` torch runs
`scaled_dot_product_attention` in bfloat16, and its CPU flash-attention kernels are
slower in bfloat16 than in float32: on the 2-core Zen 4 (AVX512-BF16,
`benchmarks/cpu_attention.py`) one layer of SmolLM2-135M at 4 x 128 tokens took 8.8 to
10.1 ms forward and backward in bfloat16 against 5.2 to 5.3 ms in float32, and a whole
bf16 LoRA step 1.66 s against 1.53 s (0.93x) with attention in float32. Attention is a
small share of the FLOPs at these lengths, so float32 costs little and rounds less.
Longer sequences turn it around: one layer's masked attention forward and backward at
4 x 512 tokens took 82.7 ms in bfloat16 and 80.8 ms in float32, at 4 x 2048 992 ms
against 1,162 ms (the same machine, flash kernel, block mask; `benchmarks/cpu_attention.py
--lengths 128,512,2048`). So the wrapper casts only
sequences shorter than `FLOAT32_BELOW` tokens; a `sequence_len` of 512 and more keeps
torch's bfloat16 attention.

`use_float32_cpu_attention` puts a wrapper in front of transformers' `sdpa` attention
that, only while CPU bfloat16 autocast is on and the sequence is shorter than
`FLOAT32_BELOW`, casts query, key and value to float32, runs the same kernel with
autocast off and casts the output back to the query's dtype. Everything else (float32
runs, which the goldens pin, CUDA, inference without autocast) calls transformers'
function unchanged. The model config is not touched, so saved and exported configs are
as before.
"""

from __future__ import annotations

from typing import Any

FLOAT32_BELOW = 512  # tokens per sequence (the query's length) from which bfloat16 is as fast
_ORIGINAL: list[Any] = []  # transformers' sdpa function, once wrapped


def use_float32_cpu_attention() -> None:
    """Route `sdpa` attention through `_sdpa` for every model in this process (idempotent)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if not _ORIGINAL:
        _ORIGINAL.append(sdpa_attention_forward)
        AttentionInterface.register("sdpa", _sdpa)


def _sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> tuple[Any, Any]:
    import torch

    original = _ORIGINAL[0]
    in_float32 = (
        query.device.type == "cpu"
        and query.shape[-2] < FLOAT32_BELOW
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )
    if not in_float32:
        return original(module, query, key, value, attention_mask, **kwargs)
    with torch.autocast("cpu", enabled=False):
        out, weights = original(module, query.float(), key.float(), value.float(), attention_mask, **kwargs)
    return out.to(query.dtype), weights

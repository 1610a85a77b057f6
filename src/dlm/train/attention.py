"""Attention in float32 while the CPU's bfloat16 autocast is on, and grouped key/value heads
left grouped on a CPU.

Under `torch.autocast("cpu", dtype=torch.bfloat16)` torch runs
`scaled_dot_product_attention` in bfloat16, and its CPU flash-attention kernels are
slower in bfloat16 than in float32 at short lengths, so a whole bf16 LoRA step is faster
with attention in float32. Attention is a small share of the FLOPs at these lengths, so
float32 costs little and rounds less. Longer sequences turn it around: from about 512
tokens bfloat16 is level, and faster beyond (docs/benchmarks.md, "CPU attention in
bfloat16 and float32"). So the wrapper casts
sequences shorter than `FLOAT32_BELOW` tokens, and longer ones keep torch's bfloat16
attention only where torch runs its AVX512 kernels: its bfloat16 CPU attention packs
operands with AVX512 instructions and fails under the AVX2 pin `dlm.cpu_isa` sets by
default, so there every length attends in float32.

`use_dlm_attention` has one model attend through a wrapper of transformers' `sdpa`
attention that, only while CPU bfloat16 autocast is on (and the sequence is shorter than
`FLOAT32_BELOW`, or torch's kernels are below AVX512), casts query, key and value to float32, runs the same kernel with
autocast off and casts the output back to the query's dtype. Everything else (float32
runs, CUDA, inference without autocast) runs in the dtype it comes in.

On a CPU the wrapper also keeps grouped key/value heads grouped (SmolLM2-135M: 9 query
heads over 3 key/value heads). transformers repeats each key and value head for its
group before torch's kernel unless the call has no mask, and a packed or padded batch
always has one; the repeated copies, float32 [B, heads, T, head_dim] twice a layer, are
what the kernel keeps for backward. torch's CPU flash kernel takes the groups itself
(`enable_gqa`): the output and the query's gradient are the same bits, the key's and
value's gradients sum the group's heads in another order (last-bit differences), and a
layer's masked forward and backward take less time without the copies
(docs/benchmarks.md, "CPU attention in bfloat16 and float32").
Calls with a KV cache, a position bias or one query token (generation's decode steps)
keep transformers' path.

A training row of several examples (`dlm.train.shared_prefix`) that comes with its blocks
(`dlm.train.row_blocks`, keyword arguments the decoder hands every layer) attends by
those blocks on a CPU instead of under its mask: each tail against the prefix and itself.
"""

from __future__ import annotations

from typing import Any

FLOAT32_BELOW = 512  # tokens per sequence (the query's length) from which bfloat16 is as fast
# the name this attention is known by in transformers' registry; models opt in one by one
NAME = "dlm_sdpa"


def use_dlm_attention(model: Any) -> None:
    """Have `model` (a transformers model, or a peft model around one) attend through
    `_sdpa`, with sdpa's masks. Only this model instance changes: the function is added to
    transformers' registry under its own `NAME` (idempotent), never over `sdpa`, so any
    other model in the process keeps the attention it was loaded with."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, _sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    for module in inner.modules():
        config = getattr(module, "config", None)
        if config is not None and getattr(config, "_attn_implementation", None) == "sdpa":
            config._attn_implementation = NAME


def bfloat16_attention_kernels() -> bool:
    """Whether torch's CPU kernels run at AVX512 or above here, which its bfloat16
    attention needs (module docstring); False under the AVX2 pin."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability()).upper().startswith(("AVX512", "AMX"))


def _sdpa(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> tuple[Any, Any]:
    import torch
    from transformers.integrations.sdpa_attention import sdpa_attention_forward as original

    in_float32 = (
        query.device.type == "cpu"
        and (query.shape[-2] < FLOAT32_BELOW or not bfloat16_attention_kernels())
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )
    if _by_blocks(query, key, kwargs):
        attend = _blocks
    else:
        attend = _cpu_grouped if _groups_kept(module, query, key, kwargs) else original
    if not in_float32:
        return attend(module, query, key, value, attention_mask, **kwargs)
    with torch.autocast("cpu", enabled=False):
        out, weights = attend(module, query.float(), key.float(), value.float(), attention_mask, **kwargs)
    return out.to(query.dtype), weights


# keyword arguments transformers' sdpa function honours that `_cpu_grouped` does not
_NOT_GROUPED = ("cache", "position_bias", "softcap", "output_attentions")


def _groups_kept(module: Any, query: Any, key: Any, kwargs: dict[str, Any]) -> bool:
    """Whether `_cpu_grouped` serves this call: a CPU self-attention over the whole
    sequence (queries and keys of one length, more than one) of a layer whose key/value
    heads serve groups of query heads, with none of `_NOT_GROUPED` set."""
    return (
        query.device.type == "cpu"
        and getattr(module, "num_key_value_groups", 1) > 1
        and 1 < query.shape[-2] == key.shape[-2]
        and _plain(kwargs)
    )


def _by_blocks(query: Any, key: Any, kwargs: dict[str, Any]) -> bool:
    """Whether this call attends one row of several examples by blocks
    (`dlm.train.row_blocks`): the row's blocks are given, for this length, on a CPU, as
    one sequence of queries over its own keys, with none of `_NOT_GROUPED` set."""
    from dlm.train.row_blocks import KEYS

    if any(kwargs.get(name) is None for name in KEYS):
        return False
    return (
        query.device.type == "cpu"
        and query.shape[0] == 1
        and query.shape[-2] == key.shape[-2] == kwargs["row_source"].shape[0]
        and _plain(kwargs)
    )


def _plain(kwargs: dict[str, Any]) -> bool:
    """Whether a call sets none of `_NOT_GROUPED`."""
    return all(kwargs.get(name) is None or kwargs.get(name) is False for name in _NOT_GROUPED)


def _blocks(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """`dlm.train.row_blocks.blocked_attention` for a `_by_blocks` call; the row's mask is
    not read (the blocks are that mask's pieces)."""
    from dlm.train.row_blocks import KEYS, blocked_attention

    out = blocked_attention(query, key, value, {k: kwargs[k] for k in KEYS}, scaling, dropout)
    return out, None


def _cpu_grouped(
    module: Any,
    query: Any,
    key: Any,
    value: Any,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, None]:
    """transformers' sdpa attention for `_groups_kept` calls, with the key/value heads
    left grouped (`enable_gqa`, module docstring).

    Args:
        query: float [B, heads, T, head_dim]; key, value: [B, kv_heads, T, head_dim].
        attention_mask: bool or additive float [B or 1, 1, T, T], or None (causal).

    Returns:
        ([B, T, heads, head_dim] contiguous, None), as transformers' function returns.
    """
    import torch

    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    out = torch.nn.functional.scaled_dot_product_attention(
        query,
        key,
        value,
        attn_mask=attention_mask,
        dropout_p=dropout,
        scale=scaling,
        is_causal=bool(causal and attention_mask is None),
        enable_gqa=True,
    )
    return out.transpose(1, 2).contiguous(), None

"""Attention over one row of several examples by blocks: the prefix against itself, each
tail against the prefix and itself, never a (query, key) pair the row's mask forbids.

A row of a micro-batch (`dlm.train.shared_prefix`) is

    [prefix][tail 1][tail 2] ... [tail K][padding]

and its 4-D mask lets tail k see the prefix and, causally, itself. torch's CPU attention
kernel computes every (query, key) pair of the row under such a mask, n^2 for n
positions, though a tail's queries may read only `prefix + its own length` keys. Here the
same attention is computed from the pieces that can attend:

- the prefix's queries against its keys, causally: one call, `is_causal`;
- the K tails stacked as a batch, each `L_max` long (the longest tail; a shorter one is
  filled with copies of its last token, whose outputs are dropped), each query reading
  the prefix's keys and its own tail's keys causally: one call, `K x L_max x (p + L_max)`
  pairs;
- a padding position's output is zero: nothing reads it (no real query attends to it, no
  loss is taken at it), as in the masked row, where it attends only to itself.

Every real query sees exactly the keys, values and positions the masked row gives it, so
each position's output is the same up to floating-point rounding, and so is each gradient
(`tests/test_row_blocks.py`). The gather before and the scatter after each call cost a
fixed time a layer, so blocks pay only in a row long enough and split finely enough:
`blocks_pay` (docs/benchmarks.md, "Attention by blocks in one row"). Shorter rows keep
the masked kernel.

`row_blocks` builds the index tensors on the host, once a micro-batch; the decoder
passes them to every layer's attention as keyword arguments (`KEYS`), and
`dlm.train.attention` calls `blocked_attention` where they are given.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from dlm.train.data import BASE

# the keyword arguments the blocks travel under, from the collated batch to each layer
KEYS = ("row_prefix", "row_tails", "row_source")
# the narrowest row (tokens) blocks are tried on: below it the gather and scatter cost more
# than the pairs they skip (docs/benchmarks.md, "Attention by blocks in one row")
BLOCKS_FROM = 160


def is_block_key(name: str) -> bool:
    """Whether model input `name` is a row's blocks, the row's own (`KEYS`) or its replay
    base pass's (`base_`-prefixed)."""
    return name.removeprefix(BASE) in KEYS


def without_blocks(inputs: dict[str, Any]) -> dict[str, Any]:
    """`inputs` (a micro-batch's model inputs) without any row's blocks
    (`is_block_key`): each row then attends under its mask."""
    return {k: v for k, v in inputs.items() if not is_block_key(k)}


def block_pairs(prefix: int, tails: Sequence[int]) -> int:
    """(query, key) pairs the blocked attention computes for a prefix of `prefix` tokens
    and tails of the given lengths (tokens): the prefix causally against itself (counted
    whole, as the kernel does), each tail padded to the longest against the prefix and
    itself."""
    longest = max(tails, default=0)
    return prefix * prefix + len(tails) * longest * (prefix + longest)


def blocks_pay(prefix: int, tails: Sequence[int], width: int) -> bool:
    """Whether a row of `width` positions (padding included) holding a prefix of `prefix`
    tokens and tails of the given lengths attends by blocks: at least `BLOCKS_FROM` wide,
    more than one tail, and at most half the row's `width ** 2` pairs computed."""
    return width >= BLOCKS_FROM and len(tails) > 1 and 2 * block_pairs(prefix, tails) <= width * width


def attention_pairs(prefix: int, tails: Sequence[int], width: int) -> int:
    """(query, key) pairs one layer's attention computes for such a row: `block_pairs`
    where `blocks_pay`, else the whole row's `width ** 2`."""
    return block_pairs(prefix, tails) if blocks_pay(prefix, tails, width) else width * width


def row_blocks(segments: np.ndarray) -> dict[str, torch.Tensor] | None:
    """The index tensors of `blocked_attention` for one row, or None where blocks do not
    pay (`blocks_pay`).

    Args:
        segments: 1-D int [n], each position's segment: 0 the prefix (the row's first
            positions), any other value a tail (each tail's positions contiguous), -1
            padding. The tails need not be numbered 1..K (a replay base pass keeps some).

    Returns:
        `row_prefix` int64 [p] (the prefix's positions), `row_tails` int64 [K, L_max]
        (each tail's positions, a short tail filled with its last position) and
        `row_source` int64 [n] (each position's place in the concatenation of the
        prefix's p outputs, the tails' K * L_max outputs and one zero row for padding).
    """
    segments = np.asarray(segments)
    n = len(segments)
    p = int(np.count_nonzero(segments == 0))
    if p and not (segments[:p] == 0).all():
        raise ValueError("the prefix must be the row's first positions")
    bounds = np.r_[0, np.flatnonzero(np.diff(segments) != 0) + 1, n]
    runs = np.array([(s, e) for s, e in zip(bounds[:-1], bounds[1:], strict=True) if segments[s] > 0], dtype=np.int64)
    if runs.size == 0:
        return None
    starts, lengths = runs[:, 0], runs[:, 1] - runs[:, 0]
    if not blocks_pay(p, lengths.tolist(), n):
        return None
    longest = int(lengths.max())
    offsets = np.minimum(np.arange(longest)[None, :], (lengths - 1)[:, None])
    tails = starts[:, None] + offsets  # [K, L_max]
    source = np.full(n, p + len(starts) * longest, dtype=np.int64)  # padding: the zero row
    source[:p] = np.arange(p)
    for k, (s, length) in enumerate(zip(starts, lengths, strict=True)):
        source[s : s + length] = p + k * longest + np.arange(length)
    return {
        "row_prefix": torch.arange(p, dtype=torch.int64),
        "row_tails": torch.from_numpy(tails.astype(np.int64)),
        "row_source": torch.from_numpy(source),
    }


def blocked_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    blocks: dict[str, torch.Tensor],
    scaling: float | None = None,
    dropout: float = 0.0,
) -> torch.Tensor:
    """Attention of one row by blocks (module docstring).

    Args:
        query: float [1, H, n, D]; key, value: float [1, H_kv, n, D] (H a multiple of
            H_kv: grouped heads stay grouped, `enable_gqa`).
        blocks: `row_blocks` of the row, on the query's device.

    Returns:
        float [1, n, H, D] contiguous, as transformers' attention functions return.
    """
    f = torch.nn.functional
    prefix, tails, source = (blocks[k] for k in KEYS)
    heads, dim = query.shape[1], query.shape[-1]
    n_tails, longest = tails.shape
    p = prefix.shape[0]
    flat = tails.reshape(-1)

    def stacked(x: torch.Tensor) -> torch.Tensor:  # [1, h, n, D] -> [K, h, L_max, D]
        return x[0].index_select(1, flat).view(x.shape[1], n_tails, longest, dim).transpose(0, 1)

    q_t, k_t, v_t = stacked(query), stacked(key), stacked(value)
    if p:
        k_p, v_p = key.index_select(2, prefix), value.index_select(2, prefix)
        k_t = torch.cat([k_p.expand(n_tails, -1, -1, -1), k_t], dim=2)
        v_t = torch.cat([v_p.expand(n_tails, -1, -1, -1), v_t], dim=2)
    causal = torch.ones(longest, longest, dtype=torch.bool, device=query.device).tril()
    mask = torch.cat([torch.ones(longest, p, dtype=torch.bool, device=query.device), causal], dim=1)
    attend = functools.partial(f.scaled_dot_product_attention, dropout_p=dropout, scale=scaling, enable_gqa=True)
    out_t = attend(q_t, k_t, v_t, attn_mask=mask)  # [K, H, L_max, D]
    pieces = [out_t.transpose(0, 1).reshape(heads, n_tails * longest, dim), query.new_zeros(heads, 1, dim)]
    if p:
        q_p = query.index_select(2, prefix)
        out_p = attend(q_p, k_p, v_p, is_causal=True)  # [1, H, p, D]
        pieces.insert(0, out_p[0])
    out = torch.cat(pieces, dim=1).index_select(1, source)  # [H, n, D]
    return out.transpose(0, 1).unsqueeze(0).contiguous()

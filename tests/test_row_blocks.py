"""Attention by blocks over one row of several examples (`dlm.train.row_blocks`): the same
outputs and gradients as the row's masked attention, the same per-example NLL, gradient
and replay KL as one example per row on a tiny Llama, and blocks only where they pay."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from tinyllama import assert_same_grads, tiny_hyper, tiny_llama

from dlm.train import row_blocks as blocks_module
from dlm.train.data import KINDS, collate
from dlm.train.model import ModelPlan, prepare_model
from dlm.train.replay_kl import replay_inputs
from dlm.train.row_blocks import BLOCKS_FROM, attention_pairs, blocked_attention, blocks_pay, row_blocks
from dlm.train.shared_prefix import collate_row, layout_of, row_mask

GEN = torch.Generator().manual_seed(5)
SYSTEM = list(range(1, 21))  # a system turn of 20 tokens, as a chat template's


def chat(question: int, answer: int) -> dict[str, np.ndarray]:
    q = torch.randint(21, 64, (question,), generator=GEN).tolist()
    a = torch.randint(21, 64, (answer,), generator=GEN).tolist()
    return {"input_ids": np.array(SYSTEM + q + a), "labels": np.array([-100] * (len(SYSTEM) + question) + a)}


# four examples whose row is wide enough for blocks: 20 + 4 tails of 50 to 60 tokens; the
# three replay tails' base pass too
EXAMPLES = [chat(24, 32), chat(18, 32), chat(28, 32), chat(24, 26)]
KINDS_OF = ["replay", "replay", "synth", "replay"]


def segments_of(prefix: int, tails: list[int], padding: int, ids: list[int] | None = None) -> np.ndarray:
    ids = ids or list(range(1, len(tails) + 1))
    parts = [np.zeros(prefix, np.int64)] + [np.full(n, k) for n, k in zip(tails, ids, strict=True)]
    return np.concatenate(parts + [np.full(padding, -1)])


def qkv(n: int, heads: int = 6, kv_heads: int = 2, dim: int = 8) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(9)
    shapes = [(1, heads, n, dim), (1, kv_heads, n, dim), (1, kv_heads, n, dim)]
    return [torch.randn(s, generator=g, requires_grad=True) for s in shapes]


def test_blocks_index_the_prefix_each_tail_filled_with_its_last_position_and_padding_the_zero_row():
    segments = segments_of(30, [70, 50, 64], 4)
    got = row_blocks(segments)
    assert got is not None
    assert got["row_prefix"].tolist() == list(range(30))
    tails, source = got["row_tails"], got["row_source"]
    assert tails.shape == (3, 70)
    assert tails[0].tolist() == list(range(30, 100))
    assert tails[1].tolist() == list(range(100, 150)) + [149] * 20  # filled with its last position
    assert tails[2, :64].tolist() == list(range(150, 214))
    assert source[:30].tolist() == list(range(30))
    assert source[100:150].tolist() == [30 + 70 + i for i in range(50)]  # tail 2's first 50 of its 70
    assert source[214:].tolist() == [30 + 3 * 70] * 4  # padding reads the zero row


def test_blocks_only_where_they_pay():
    assert row_blocks(segments_of(20, [20, 20], 0)) is None  # too narrow: the gather costs more
    assert row_blocks(segments_of(20, [200], 4)) is None  # one tail: nothing to skip
    assert row_blocks(segments_of(20, [300, 20], 4)) is None  # the long tail pads the others past half
    assert blocks_pay(20, [60] * 4, 264) and not blocks_pay(20, [60] * 4, BLOCKS_FROM - 8)
    assert attention_pairs(20, [60] * 4, 264) == 20 * 20 + 4 * 60 * 80 < 264 * 264
    assert attention_pairs(20, [20, 20], 64) == 64 * 64
    # a layout's pairs are what its row computes
    row = collate_row(EXAMPLES, 0, 512)
    assert row is not None and "row_tails" in row.inputs
    layout = layout_of(EXAMPLES, 512)
    tails = [len(e["input_ids"]) - layout.prefix for e in EXAMPLES]
    assert layout.pairs == attention_pairs(layout.prefix, tails, layout.width) < layout.width**2


@pytest.mark.parametrize(
    "prefix,tails,ids",
    [(30, [70, 50, 64], None), (0, [60, 50, 70, 55], None), (25, [66, 58, 70], [2, 4, 5])],
    ids=["prefix", "no-prefix", "replay-tails"],
)
def test_blocked_attention_is_the_masked_rows_attention(prefix: int, tails: list[int], ids: list[int] | None):
    segments = segments_of(prefix, tails, 6, ids)
    got = row_blocks(segments)
    assert got is not None
    q, k, v = qkv(len(segments))
    mask = row_mask(segments)
    masked = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    masked = masked.transpose(1, 2)  # [1, n, H, D]
    mine = blocked_attention(q, k, v, got)
    real = torch.from_numpy(segments >= 0)
    assert mine.shape == masked.shape
    assert torch.allclose(mine[:, real], masked[:, real], atol=1e-6)
    assert (mine[:, ~real] == 0).all()
    weights = torch.randn(masked.shape, generator=torch.Generator().manual_seed(1)) * real[None, :, None, None]
    g_masked = torch.autograd.grad((masked * weights).sum(), (q, k, v))
    g_mine = torch.autograd.grad((mine * weights).sum(), (q, k, v))
    for a, b in zip(g_masked, g_mine, strict=True):
        assert torch.allclose(a, b, atol=1e-5)


def model() -> Any:
    tiny = tiny_llama(64, max_position_embeddings=512, num_attention_heads=4, num_key_value_heads=2)
    m = prepare_model(tiny, ModelPlan(tiny_hyper()))
    with torch.no_grad():  # LoRA's B weights moved, so the adapter is no longer the base
        for name, p in m.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(3)) * 0.3)
    return m.eval()


def kinds(names: list[str]) -> list[np.ndarray]:
    return [np.full(len(e["input_ids"]), KINDS.index(k)) for e, k in zip(EXAMPLES, names, strict=True)]


def counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Calls of `blocked_attention`, by query length."""
    calls: list[int] = []
    real = blocks_module.blocked_attention

    def spy(query: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append(int(query.shape[-2]))
        return real(query, *args, **kwargs)

    monkeypatch.setattr(blocks_module, "blocked_attention", spy)
    return calls


def test_a_row_by_blocks_scores_and_trains_each_example_as_in_its_own_row(monkeypatch: pytest.MonkeyPatch):
    m = model()
    calls = counting(monkeypatch)
    windows = collate(EXAMPLES, 0, 512)
    row = collate_row(EXAMPLES, 0, 512)
    assert row is not None and row.segments is not None
    a, b = m(**windows.inputs), m(**row.inputs)
    assert calls == [row.processed]  # the tiny Llama's one layer attended by blocks
    per_tail = torch.stack([b[0][row.segments == k + 1].sum() for k in range(len(EXAMPLES))])
    assert torch.allclose(per_tail, a.sum(dim=1), rtol=1e-5, atol=1e-5)
    assert_same_grads(m, a, b, rtol=1e-4, atol=1e-5)


def test_the_replay_base_pass_attends_by_its_own_blocks(monkeypatch: pytest.MonkeyPatch):
    m = model()
    windows = replay_inputs(collate(EXAMPLES, 0, 512, kinds(KINDS_OF)))
    batch = collate_row(EXAMPLES, 0, 512, kinds(KINDS_OF))
    assert batch is not None
    row = replay_inputs(batch)
    width = row["base_input_ids"].shape[1]  # the prefix and the three replay tails
    assert row["base_row_source"].shape == (width,) and row["base_row_tails"].shape[0] == 3
    calls = counting(monkeypatch)
    kl_windows = m(**windows).reshape(-1)[windows["replay_rows"]]
    kl_row = m(**row).reshape(-1)[row["replay_rows"]]
    assert calls == [batch.processed, width]  # the adapter's row, then the base pass's
    assert bool((kl_row > 0).all()) and torch.allclose(kl_row, kl_windows, rtol=1e-4, atol=1e-6)


def test_a_misspelt_block_is_refused_not_ignored():
    row = collate_row(EXAMPLES, 0, 512)
    assert row is not None
    with pytest.raises(TypeError, match="row_tail"):
        model()(**row.inputs, row_tail=row.inputs["row_tails"])

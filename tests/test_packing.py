"""Packed training blocks: every example scored exactly as it is alone.

The model half runs the real SmolLM2 on CPU with sdpa and eager attention: packed
blocks (position_ids restarting per example, no attention_mask) must give the same
per-example loss as each example fed alone, and an edit to one example must leave
the logits of its block neighbours untouched.
"""

import numpy as np
import pytest
import torch

from dlm.tokenize.seam import TokenizedRows
from dlm.train.data import MIN_STEP, collate, padded_length
from dlm.train.dataset import PackedDataset, WindowDataset, build_dataset, pack_blocks


def rows(lengths, n_prompt, kinds=None, base=100):
    data = [np.arange(base * i + 1, base * i + 1 + n, dtype=np.uint16) for i, n in enumerate(lengths)]
    return TokenizedRows(
        lengths=np.array(lengths, np.int64),
        n_prompt=np.array(n_prompt, np.int32),
        keys=[f"k{i}" for i in range(len(lengths))],
        read=lambda i: data[i],
        kinds=kinds or ["prose"] * len(lengths),
    ), data


def test_best_fit_decreasing_places_every_example_once_within_capacity():
    lengths = np.array([6, 5, 5, 4, 3, 3, 2, 2, 1, 8])
    members, start = pack_blocks(lengths, 8)
    assert sorted(members.tolist()) == list(range(len(lengths)))
    sums = np.add.reduceat(lengths[members], start[:-1])
    assert (sums <= 8).all()
    assert len(sums) == 5  # 39 tokens: five blocks of 8 is the least possible
    again = pack_blocks(lengths, 8)
    assert np.array_equal(again[0], members) and np.array_equal(again[1], start)


def test_packed_blocks_predict_every_token_after_a_rows_first_exactly_once():
    tok, data = rows([10, 3, 25, 8, 9, 2], [0, 0, 0, 0, 0, 0])
    ds = PackedDataset(tok, sequence_len=8)
    predicted = []
    for i in range(len(ds)):
        ex = ds[i]
        assert ex["input_ids"].shape[0] <= 8
        predicted.extend(ex["input_ids"][ex["labels"] != -100].tolist())
        starts = np.flatnonzero(ex["position_ids"] == 0)
        assert starts[0] == 0 and (ex["labels"][starts] == -100).all()
    expected = np.concatenate([d[1:] for d in data]).tolist()
    assert sorted(predicted) == sorted(expected)
    assert len(ds) < len(WindowDataset(tok, sequence_len=8))  # short rows share blocks


def test_packed_blocks_keep_instruction_prompts_masked():
    tok, data = rows([6, 5], [4, 0], kinds=["instruction", "prose"])
    ds = PackedDataset(tok, sequence_len=16)
    assert len(ds) == 2  # instruction examples pack apart from the rest
    qa = next(ds[i] for i in range(2) if ds[i]["input_ids"][0] == data[0][0])
    assert qa["labels"].tolist() == [-100] * 4 + data[0][4:].tolist()


def test_instruction_share_repeats_whole_blocks_never_one_pair_twice_in_a_block():
    kinds = ["source", "instruction", "instruction"]
    tok, data = rows([30, 5, 5], [0, 2, 2], kinds=kinds)
    ds = build_dataset(tok, sequence_len=8, packing=True, instruction_share=0.5)
    assert isinstance(ds, PackedDataset) and ds.instruction_repeats == 3  # 34 other tokens, 10 Q/A
    for i in range(len(ds)):
        firsts = ds[i]["input_ids"][ds[i]["position_ids"] == 0].tolist()
        assert len(firsts) == len(set(firsts))
    qa_blocks = [i for i in range(len(ds)) if ds[i]["input_ids"][0] in (data[1][0], data[2][0])]
    assert len(qa_blocks) == 3 * 2  # each 5-token pair alone in an 8-token block, three times


def test_collator_pads_a_short_block_as_a_sequence_of_its_own():
    batch = collate(
        [
            {
                "input_ids": np.array([5, 6, 7, 8]),
                "labels": np.array([-100, 6, -100, 8]),
                "position_ids": np.array([0, 1, 0, 1]),
            },
            {"input_ids": np.array([9, 10]), "labels": np.array([-100, 10]), "position_ids": np.array([0, 1])},
        ],
        pad_id=0,
    )
    out = batch.inputs
    assert "attention_mask" not in out
    assert out["position_ids"][:, :6].tolist() == [[0, 1, 0, 1, 0, 1], [0, 1, 0, 1, 2, 3]]
    assert out["labels"][1, :4].tolist() == [-100, 10, -100, -100]
    # the positions whose next label carries loss, flat over [B, n]: 6 and 8 of row 0, 10 of row 1
    n = out["input_ids"].shape[1]
    assert out["loss_rows"].tolist() == [0, 2, n + 0]
    assert (batch.tokens, batch.processed) == (6, 2 * n)


def test_collator_pads_windows_with_an_attention_mask():
    out = collate(
        [
            {"input_ids": np.array([5, 6, 7]), "labels": np.array([5, 6, 7])},
            {"input_ids": np.array([9]), "labels": np.array([9])},
        ],
        pad_id=0,
    ).inputs
    assert out["attention_mask"][:, :4].tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]] and "position_ids" not in out


def test_collator_rounds_the_length_up_and_no_further_than_the_limit():
    block = {"input_ids": np.arange(1, 67), "labels": np.arange(1, 67), "position_ids": np.arange(66)}
    out = collate([block], pad_id=0, limit=128).inputs
    assert out["input_ids"].shape == (1, 72)  # 66 -> a multiple of 8
    assert out["labels"][0, 66:].tolist() == [-100] * 6  # the tail is never scored
    assert out["position_ids"][0, 66:].tolist() == list(range(6))  # a sequence of its own
    assert collate([block], pad_id=0, limit=67).inputs["input_ids"].shape == (1, 67)
    window = {"input_ids": np.arange(1, 67), "labels": np.arange(1, 67)}
    assert collate([window], pad_id=0).inputs["attention_mask"].tolist() == [[1] * 66 + [0] * 6]


def test_padded_length_rounds_to_an_eighth_of_the_doubling_and_at_least_min_step():
    lengths = (1, 5, 8, 9, 17, 60, 64, 65, 70, 127, 128, 130, 700, 1500)
    assert [padded_length(n) for n in lengths] == [8, 8, 8, 16, 24, 64, 64, 72, 72, 128, 128, 144, 704, 1536]
    assert MIN_STEP == 8
    # under an eighth of the longest example from 64 tokens up, under MIN_STEP below
    assert all(padded_length(n) - n < max(MIN_STEP, n / 8) for n in range(1, 2049))
    assert all(padded_length(n) % MIN_STEP == 0 for n in range(1, 2049))
    # at most 8 widths per doubling: (64, 128], (128, 256], ... take 8 each, 48 up to 2048
    widths = sorted({padded_length(n) for n in range(1, 2049)})
    per_doubling = [sum(1 for w in widths if 2**k < w <= 2 ** (k + 1)) for k in range(11)]
    assert per_doubling == [0, 0, 1, 1, 2, 4, 8, 8, 8, 8, 8] and len(widths) == 48
    assert padded_length(2047, limit=2048) == 2048 and padded_length(2049, limit=2048) == 2049
    assert padded_length(70, limit=71) == 71 and padded_length(70, limit=60) == 70


@pytest.fixture(scope="module")
def smollm2(smollm2_ref):
    from dlm.models import load_model

    model = load_model(smollm2_ref)
    model.eval()
    return model


def _loss_sum(model, batch):
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}, use_cache=False).logits.float()
    labels = batch["labels"][:, 1:]
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=-100, reduction="sum"
    )


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_packed_loss_equals_each_example_alone(smollm2, attention):
    smollm2.config._attn_implementation = attention
    rng = np.random.default_rng(0)
    lengths = [23, 9, 40, 5, 17, 31]
    tok_rows = [rng.integers(100, 40_000, n).astype(np.uint16) for n in lengths]
    tok = TokenizedRows(
        lengths=np.array(lengths, np.int64),
        n_prompt=np.array([0, 4, 0, 2, 0, 0], np.int32),
        keys=[f"k{i}" for i in range(6)],
        read=lambda i: tok_rows[i],
        kinds=["prose", "instruction", "prose", "instruction", "prose", "prose"],
    )
    packed = PackedDataset(tok, sequence_len=48)
    windows = WindowDataset(tok, sequence_len=48)
    assert len(packed) < len(windows)

    def exact(examples):  # no rounding: the inputs as long as the longest example
        batch = collate(examples, pad_id=0).inputs
        longest = max(len(e["input_ids"]) for e in examples)
        return {k: v[:, :longest] for k, v in batch.items() if k != "loss_rows"}

    alone = sum(_loss_sum(smollm2, exact([windows[i]])) for i in range(len(windows)))
    together = _loss_sum(smollm2, exact([packed[i] for i in range(len(packed))]))
    assert float(together) == pytest.approx(float(alone), rel=1e-5)
    rounded = collate([packed[i] for i in range(len(packed))], pad_id=0, limit=64).inputs
    rounded.pop("loss_rows")
    assert rounded["input_ids"].shape[1] == padded_length(int(packed.lengths.max()), 64)
    assert float(_loss_sum(smollm2, rounded)) == pytest.approx(float(alone), rel=1e-5)  # the tail adds nothing


def test_no_token_attends_across_packed_examples_in_training_mode(smollm2):
    smollm2.config._attn_implementation = "sdpa"
    a, b = torch.arange(200, 220), torch.arange(500, 512)
    positions = torch.cat([torch.arange(20), torch.arange(12)])[None]
    smollm2.train()
    try:
        with torch.no_grad():
            base = smollm2(input_ids=torch.cat([a, b])[None], position_ids=positions, use_cache=False).logits
            edited = smollm2(input_ids=torch.cat([a + 7, b])[None], position_ids=positions, use_cache=False).logits
            alone = smollm2(input_ids=b[None], use_cache=False).logits
        with torch.no_grad():  # a KV cache (the config's default) turns packed detection off
            cached = smollm2(input_ids=torch.cat([a, b])[None], position_ids=positions).logits
    finally:
        smollm2.eval()
    assert torch.equal(base[0, 20:], edited[0, 20:])
    torch.testing.assert_close(base[0, 20:], alone[0], rtol=1e-4, atol=1e-4)
    assert not torch.allclose(cached[0, 20:], alone[0], atol=1e-2)
    assert smollm2.config.use_cache is True


def test_collator_takes_lists_from_a_plain_dataset():
    out = collate([{"input_ids": [5, 6], "labels": [5, 6]}, {"input_ids": [7], "labels": [7]}], pad_id=0).inputs
    assert out["input_ids"][:, :2].tolist() == [[5, 6], [7, 0]] and out["labels"][:, :2].tolist() == [[5, 6], [7, -100]]

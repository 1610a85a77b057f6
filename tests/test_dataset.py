import numpy as np

from dlm.tokenize.seam import TokenizedRows
from dlm.train.dataset import PackedDataset, WindowDataset, build_dataset, instruction_repeats


def rows(lengths, n_prompt, dtype=np.uint16, kinds=None):
    data = [np.arange(100 * i, 100 * i + n, dtype=dtype) for i, n in enumerate(lengths)]
    return TokenizedRows(
        lengths=np.array(lengths, np.int64),
        n_prompt=np.array(n_prompt, np.int32),
        keys=[f"k{i}" for i in range(len(lengths))],
        read=lambda i: data[i],
        kinds=kinds or ["prose"] * len(lengths),
    ), data


def test_windows_predict_every_token_after_the_first_exactly_once():
    tok, data = rows([10, 3, 25, 8, 9], [0, 0, 0, 0, 0])
    ds = WindowDataset(tok, sequence_len=8)
    predicted = np.concatenate([ds[i]["input_ids"][1:] for i in range(len(ds))])
    assert np.array_equal(predicted, np.concatenate([d[1:] for d in data]).astype(np.int64))
    assert ds[0]["input_ids"].dtype == np.int64
    assert max(len(ds[i]["input_ids"]) for i in range(len(ds))) == 8


def test_prompt_tokens_are_masked_and_prompt_only_windows_dropped():
    tok, _ = rows([20], [12])
    ds = WindowDataset(tok, sequence_len=8)  # windows [0,8) is all prompt -> dropped
    assert [(int(a), int(b)) for a, b in zip(ds.start, ds.stop, strict=False)] == [(7, 15), (14, 20)]
    first = ds[0]
    assert list(first["labels"][:5]) == [-100] * 5 and first["labels"][5] == first["input_ids"][5]


def test_row_of_exactly_sequence_len_is_one_window():
    tok, _ = rows([8], [0])
    assert len(WindowDataset(tok, sequence_len=8)) == 1


def test_packing_fills_blocks_with_whole_examples():
    tok, data = rows([5, 7, 3], [0, 3, 0])
    ds = PackedDataset(tok, sequence_len=8)
    assert [len(ds[i]["input_ids"]) for i in range(len(ds))] == [7, 8]  # 7 alone; 5 + 3
    assert ds[1]["position_ids"].tolist() == [0, 1, 2, 3, 4, 0, 1, 2]
    assert ds.total_tokens == 15


def test_lengths_and_loss_tokens_per_example_match_the_examples():
    tok, _ = rows([5, 7, 3, 12], [0, 3, 0, 2])
    for ds in (WindowDataset(tok, sequence_len=8), PackedDataset(tok, sequence_len=8)):
        examples = [ds[i] for i in range(len(ds))]
        assert ds.lengths.tolist() == [len(e["input_ids"]) for e in examples]
        assert ds.loss_tokens.tolist() == [int((e["labels"][1:] != -100).sum()) for e in examples]
        kinds = [ds.token_kinds(i, np.arange(4)) for i in range(len(ds))]
        assert [len(k) for k in kinds] == ds.lengths.tolist()


def test_instruction_repeats_reach_the_share_and_never_drop_below_one():
    assert instruction_repeats(6, 71_000, 0.25) == 3944  # 6 * 3944 / (6 * 3944 + 71000) = 0.25
    assert instruction_repeats(6, 71_000, None) == 1
    assert instruction_repeats(0, 10, 0.5) == 1 and instruction_repeats(5, 0, 0.5) == 1
    assert instruction_repeats(100, 10, 0.1) == 1  # already above the share: never fewer than once


def test_instruction_share_repeats_qa_windows_and_leaves_the_rest_alone():
    kinds = ["source"] * 9 + ["instruction"]
    tok, data = rows([20] * 9 + [6], [0] * 9 + [3], kinds=kinds)
    plain = WindowDataset(tok, sequence_len=8)
    shared = build_dataset(tok, sequence_len=8, packing=False, instruction_share=0.5)
    assert isinstance(shared, WindowDataset)
    n_source = len(plain) - 1
    qa = [i for i in range(len(shared)) if int(shared.row[i]) == 9]
    assert len(qa) == shared.instruction_repeats == n_source
    assert len(shared) == 2 * n_source
    assert all(np.array_equal(shared[i]["labels"], plain[len(plain) - 1]["labels"]) for i in qa)
    kept = [i for i in range(len(shared)) if int(shared.row[i]) != 9]
    assert [int(shared.start[i]) for i in kept] == [int(plain.start[i]) for i in range(n_source)]


def test_instruction_share_with_packing_counts_tokens():
    kinds = ["source", "instruction"]
    tok, data = rows([30, 10], [0, 4], kinds=kinds)
    ds = build_dataset(tok, sequence_len=8, packing=True, instruction_share=0.5)
    assert isinstance(ds, PackedDataset) and ds.instruction_repeats == 3  # 34 window tokens against 11
    qa = [i for i in range(len(ds)) if ds[i]["input_ids"][0] == data[1][0]]
    assert len(qa) == 3
    masked = np.concatenate([ds[i]["labels"] for i in qa]) == -100
    assert int(masked.sum()) == 3 * 4  # each repeat keeps its prompt masked

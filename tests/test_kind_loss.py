"""The per-kind train loss read from the trainer's fused loss equals the model's own
loss on each kind's tokens (a tiny randomly initialized Llama, no second pass)."""

import numpy as np
import torch
from tinyllama import tiny_llama

from dlm.train.kind_loss import KindLoss
from dlm.train.lm_loss import causal_lm_token_nll


class Rows:
    def __init__(self, kinds):
        self.kinds = kinds


class Windows:
    """The `WindowDataset` layout: one window per row here."""

    def __init__(self, examples, kinds):
        self.examples, self.rows = examples, Rows(kinds)
        self.row = np.arange(len(examples))
        self.start = np.zeros(len(examples), dtype=np.int64)
        self.stop = np.array([len(e["input_ids"]) for e in examples])

    def __len__(self):
        return len(self.examples)

    def __getitem__(self, i):
        return self.examples[i]


def example(ids, n_prompt=0):
    ids = np.array(ids, dtype=np.int64)
    return {"input_ids": ids, "labels": np.where(np.arange(len(ids)) >= n_prompt, ids, -100)}


def test_window_means_match_the_models_own_loss_per_kind():
    model = tiny_llama().train()
    examples = [example([1, 5, 9, 13, 17, 21]), example([2, 6, 10, 14], n_prompt=2), example([3, 7, 11])]
    dataset = Windows(examples, ["prose", "instruction", "source"])
    tracker = KindLoss(dataset, dataset.rows.kinds)
    recording = tracker.wrap(dataset)
    hooks = tracker.attach(model)
    batch = [recording[i] for i in range(3)]
    width = max(len(e["input_ids"]) for e in batch)
    ids = torch.tensor(
        np.array([np.pad(e["input_ids"], (0, width - len(e["input_ids"]))) for e in batch])
    )  # right-padded
    labels = torch.tensor(
        np.array([np.pad(e["labels"], (0, width - len(e["labels"])), constant_values=-100) for e in batch])
    )
    nll = causal_lm_token_nll(model, {"input_ids": ids, "labels": labels})
    tracker.see_nll(nll.detach())
    nll.sum().backward()
    window = tracker.take_window()
    for hook in hooks:
        hook.remove()
    model.eval()
    with torch.no_grad():
        for e, kind in zip(examples, ["prose", "instruction", "source"], strict=False):
            own = model(input_ids=torch.as_tensor(e["input_ids"])[None], labels=torch.as_tensor(e["labels"])[None]).loss
            loss, tokens = window[kind]
            assert abs(loss - float(own)) < 1e-5
            assert tokens == int((e["labels"][1:] != -100).sum())
    assert tracker.take_window() == {}  # a new window starts empty


def test_eval_passes_and_unmatched_batches_are_not_counted():
    model = tiny_llama()
    dataset = Windows([example([1, 2, 3, 4])], ["prose"])
    tracker = KindLoss(dataset, dataset.rows.kinds)
    tracker.attach(model)
    model.eval()
    tracker.wrap(dataset)[0]
    with torch.no_grad():
        model(input_ids=torch.tensor([[1, 2, 3, 4]]))
        tracker.see_nll(torch.zeros(1, 4))  # an eval pass: the input hook matched nothing
    model.train()
    model(input_ids=torch.tensor([[9, 9, 9, 9]]))  # fetched by no data loader
    tracker.see_nll(torch.zeros(1, 4))
    assert tracker.take_window() == {}

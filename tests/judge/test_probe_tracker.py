"""The probes during training (dlm.judge.track): scores, the best weights kept and
restored, the early stop, and scores alone without keeping."""

from typing import Any

import numpy as np
import torch

from dlm.judge.track import ProbeTracker
from dlm.train.evaluate import EvalExample
from tests.judge.uniformlm import LogitsLM

VOCAB = 8


class Leaning(LogitsLM):
    """Logits put `w` on token 3 and 0 elsewhere: the answer `3 3 3` gets likelier as `w` grows."""

    def __init__(self) -> None:
        super().__init__(VOCAB)
        self.w = torch.nn.Parameter(torch.zeros(1))

    def logits(self, input_ids: Any) -> torch.Tensor:
        logits = torch.zeros(*input_ids.shape, VOCAB)
        logits[..., 3] = self.w
        return logits


def examples() -> list[EvalExample]:
    ids = np.array([1, 2, 3, 3, 3], dtype=np.int64)
    return [EvalExample(ids, np.where(np.arange(5) >= 2, ids, -100), "probe")]


def test_the_best_weights_come_back_when_training_ends_worse() -> None:
    model, seen = Leaning(), []
    tracker = ProbeTracker(examples(), every_steps=1, pad_id=0, on_score=lambda s, v: seen.append((s, v)))
    for step, w in ((1, 1.0), (2, 3.0), (3, 0.5)):
        model.w.data.fill_(w)
        tracker.measure(model, step)
    model.w.data.fill_(-1.0)
    assert tracker.restore_best(model, final_step=4)
    assert float(model.w.detach()) == 3.0 and tracker.best_step == 2
    assert [s for s, _ in seen] == [1, 2, 3, 4]
    assert seen[1][1] > seen[0][1] > seen[2][1]  # log-probs rise with w


def test_a_run_that_ends_best_is_left_alone() -> None:
    model = Leaning()
    tracker = ProbeTracker(examples(), every_steps=1, pad_id=0)
    model.w.data.fill_(1.0)
    tracker.measure(model, 1)
    model.w.data.fill_(2.0)
    assert not tracker.restore_best(model, final_step=2)
    assert float(model.w.detach()) == 2.0


def test_patience_stops_after_scores_without_gain() -> None:
    model = Leaning()
    tracker = ProbeTracker(examples(), every_steps=1, pad_id=0, patience=2)
    model.w.data.fill_(2.0)
    assert not tracker.measure(model, 1)
    model.w.data.fill_(1.0)
    assert not tracker.measure(model, 2)
    assert tracker.measure(model, 3) and tracker.stopped_early


def test_without_keep_the_scores_are_recorded_and_the_weights_left_alone() -> None:
    model, seen = Leaning(), []
    tracker = ProbeTracker(
        examples(), every_steps=1, pad_id=0, patience=1, keep=False, on_score=lambda s, v: seen.append((s, v))
    )
    for step, w in ((1, 3.0), (2, 1.0), (3, 0.5)):
        model.w.data.fill_(w)
        assert not tracker.measure(model, step)  # never asks to stop, however the score falls
    assert not tracker.restore_best(model, final_step=4)
    assert float(model.w.detach()) == 0.5 and not tracker.stopped_early
    assert [s for s, _ in seen] == [1, 2, 3, 4] and seen[0][1] > seen[1][1] > seen[2][1]

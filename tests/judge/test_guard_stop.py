"""The early stop on the general-ability guard (dlm.judge.guard_stop): the stop past the
limit, the weights put back, the resume state, and `dlm train` stopping on it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from judgedoc import judged_document

from dlm.judge.guard_stop import GuardStop, sample_examples
from dlm.train.evaluate import EvalExample
from tests.judge.uniformlm import LogitsLM

VOCAB = 8


class Lora(LogitsLM):
    """Logits put `lora_A * lora_B` on token 3: general text without a 3 gets less likely
    as the product grows; both zero-B weights give the uniform base."""

    def __init__(self) -> None:
        super().__init__(VOCAB)
        self.lora_A = torch.nn.Parameter(torch.ones(1))
        self.lora_B = torch.nn.Parameter(torch.zeros(1))

    def logits(self, input_ids: Any) -> torch.Tensor:
        logits = torch.zeros(*input_ids.shape, VOCAB)
        logits[..., 3] = self.lora_A * self.lora_B
        return logits


def general() -> list[EvalExample]:
    ids = np.array([1, 2, 4, 5, 6, 7, 1, 2], dtype=np.int64)
    return [EvalExample(ids, ids.copy(), "general")]


def started(model: Lora, limit: float, every_steps: int = 1, patience: int = 1, max_steps: int = 100) -> GuardStop:
    guard = GuardStop(
        general(), every_steps=every_steps, max_steps=max_steps, limit_pct=limit, pad_id=0, patience=patience
    )
    guard.start(model)  # lora_B = 0: the base
    return guard


def test_past_the_limit_training_stops_and_the_last_weights_within_it_come_back() -> None:
    model = Lora()
    guard = started(model, limit=5.0)
    model.lora_B.data.fill_(0.2)  # a little off the base
    assert not guard.between_steps(model, 4)
    model.lora_B.data.fill_(3.0)  # far off
    assert guard.between_steps(model, 8)
    assert float(model.lora_B.detach()) == pytest.approx(0.2) and guard.safe_step == 4 and guard.stopped_at == 8
    (_, small), (_, large) = guard.changes
    assert 0 < small <= 5.0 < large
    note = guard.note()
    assert note is not None and "stopped after step 8" in note and "kept the adapter of step 4" in note
    assert "general_max_increase (5%)" in note
    assert guard.summary() == {
        "limit_pct": 5.0,
        "patience": 1,
        "changes": [[4, round(small, 2)], [8, round(large, 2)]],
        "stopped_at": 8,
        "kept_step": 4,
    }


def test_within_the_limit_nothing_stops_and_no_weight_changes() -> None:
    model = Lora()
    guard = started(model, limit=50.0)
    for step, b in ((1, 0.5), (2, 1.0), (3, 1.5)):
        model.lora_B.data.fill_(b)
        assert not guard.between_steps(model, step)
    assert float(model.lora_B.detach()) == 1.5 and guard.note() is None
    assert [s for s, _ in guard.changes] == [1, 2, 3] and guard.changes[0][1] < guard.changes[2][1]
    summary = guard.summary()
    assert [step for step, _ in summary["changes"]] == [1, 2, 3]
    assert summary["stopped_at"] is None and summary["kept_step"] is None


def test_past_the_limit_at_the_first_measurement_the_adapter_adds_nothing() -> None:
    model = Lora()
    guard = started(model, limit=1.0)
    model.lora_A.data.fill_(2.0)
    model.lora_B.data.fill_(3.0)
    assert guard.between_steps(model, 4)
    assert float(model.lora_B.detach()) == 0.0  # B at zero: the base model's outputs
    assert "kept no adapter update (the base model)" in (guard.note() or "")


def test_with_patience_one_pass_is_waited_out_and_two_in_a_row_stop() -> None:
    model = Lora()
    guard = started(model, limit=5.0, every_steps=4, patience=2)
    model.lora_B.data.fill_(0.2)
    assert not guard.between_steps(model, 4)  # within: the safe weights
    model.lora_B.data.fill_(3.0)
    assert not guard.between_steps(model, 8) and guard.passes == 1  # a pass: perhaps a transient
    model.lora_B.data.fill_(0.3)
    assert not guard.between_steps(model, 12) and guard.passes == 0 and guard.safe_step == 12  # it was one
    model.lora_B.data.fill_(3.0)
    assert not guard.between_steps(model, 16)
    model.lora_B.data.fill_(3.5)
    assert guard.between_steps(model, 20)  # two in a row: stop, the weights of step 12 back
    assert float(model.lora_B.detach()) == pytest.approx(0.3) and guard.stopped_at == 20
    note = guard.note() or ""
    assert "kept the adapter of step 12" in note and note.count("%") == 3  # both passes and the limit


def test_a_pass_still_unconfirmed_at_the_end_is_measured_after_the_last_step() -> None:
    model = Lora()
    guard = started(model, limit=5.0, every_steps=4, patience=2, max_steps=10)
    assert not guard.due(10, 10)  # with no pass, the last step is not measured
    model.lora_B.data.fill_(0.2)
    assert guard.due(4, 10) and not guard.between_steps(model, 4)
    model.lora_B.data.fill_(3.0)
    assert guard.due(8, 10) and not guard.between_steps(model, 8)
    assert guard.due(10, 10)  # a pass unconfirmed: the adapter after the last step is measured
    assert guard.between_steps(model, 10)  # still past it: the safe weights back
    assert float(model.lora_B.detach()) == pytest.approx(0.2) and guard.summary()["kept_step"] == 4


def test_a_resumed_guard_keeps_the_base_score_and_the_safe_weights(tmp_path: Path) -> None:
    model = Lora()
    guard = started(model, limit=5.0)
    model.lora_B.data.fill_(0.2)
    guard.between_steps(model, 4)
    guard.save(tmp_path)
    resumed = GuardStop(general(), every_steps=1, max_steps=100, limit_pct=5.0, pad_id=0)
    resumed.load(tmp_path)
    resumed.start(Lora())  # a resumed run does not score the base again
    assert resumed.base == guard.base and resumed.changes == guard.changes and resumed.safe_step == 4
    model.lora_B.data.fill_(3.0)
    assert resumed.between_steps(model, 8) and float(model.lora_B.detach()) == pytest.approx(0.2)


def test_the_sample_is_every_fifth_passage_cut_short() -> None:
    passages = [
        EvalExample(np.arange(300, dtype=np.int64) + i, np.arange(300, dtype=np.int64), "general") for i in range(11)
    ]
    sample = sample_examples(passages)
    assert [int(ex.input_ids[0]) for ex in sample] == [0, 5, 10]
    assert all(ex.input_ids.shape == (128,) and ex.labels.shape == (128,) for ex in sample)


@pytest.mark.integration
def test_dlm_train_stops_on_the_guard_and_reports_why(tmp_path: Path, smollm2_ref) -> None:
    from dlm.actions.training import TrainOptions, train_document
    from dlm.doc import load_document

    text = judged_document(every_steps=None, max_steps=16).replace(
        "    judge: false\n", "    judge: false\n    general_max_increase: 0\n"
    )
    path = tmp_path / "stations.dlm"
    path.write_text(text.replace("learning_rate: 0.002", "learning_rate: 0.02"))
    report = train_document(load_document(path), TrainOptions(use_cache=False))
    # any rise stops it, at the second measurement in a row: fitting 24 near-identical
    # sentences at a high rate raises general NLL
    assert report.steps == 8
    (warning,) = [w for w in report.warnings if "general_max_increase" in w]
    assert warning.startswith("stopped after step 8: general text scored +") and "kept no adapter update" in warning
    assert report.guard is not None and report.guard["stopped_at"] == 8 and report.guard["kept_step"] == 0
    assert report.guard["limit_pct"] == 0 and [step for step, _ in report.guard["changes"]] == [4, 8]


def test_the_train_report_prints_each_measurement_and_the_limit() -> None:
    from types import SimpleNamespace

    from dlm.cli.judge_render import print_guard
    from dlm.cli.reporter import console

    guard = {"limit_pct": 5.0, "changes": [[23, 1.24], [46, 2.5]], "stopped_at": None, "kept_step": None}
    with console.capture() as captured:
        print_guard(SimpleNamespace(guard=guard))
        print_guard(SimpleNamespace(guard=None))  # no guard ran (a short run, several ranks): no line
    assert captured.get().splitlines() == [
        "general text during training: +1.2% (step 23), +2.5% (step 46); the limit 5%"
    ]

"""The training loop (`dlm.train.loop`) and its schedule (`dlm.train.data`) on a tiny Llama:
the order of examples, the loss divisor, resuming to the same bytes, per-kind losses,
measurements and early stops, checkpoints."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from tinyllama import tiny_hyper, train_tiny

from dlm.doc.budget import Every
from dlm.train.checkpoint import latest_checkpoint
from dlm.train.data import Schedule, epoch_steps, padded_length, sightings

GEN = torch.Generator().manual_seed(11)
ROWS = [torch.randint(3, 64, (int(n),), generator=GEN).tolist() for n in (12, 5, 9, 12, 3, 7, 12, 10)]


class Steps:
    """A sink that keeps every logged step and per-kind window."""

    def __init__(self) -> None:
        self.losses: list[tuple[int, float]] = []
        self.kinds: list[tuple[int, dict]] = []

    def on_train_start(self, total: int) -> None:
        self.total = total

    def on_step(self, step, loss, *rest) -> None:  # noqa: ANN001
        self.losses.append((step, loss))

    def on_kind_losses(self, step, losses) -> None:  # noqa: ANN001
        self.kinds.append((step, losses))


def lora_weights(result) -> dict[str, torch.Tensor]:  # noqa: ANN001
    return {k: v.detach().clone() for k, v in result.model.state_dict().items() if "lora_" in k}


def test_an_epoch_visits_every_example_once_in_micro_batches_of_one_width():
    lengths = np.array([5, 60, 7, 64, 6, 61, 8, 63] * 8)
    schedule = Schedule(lengths, lengths - 1, micro_batch=4, accumulation=1, world_size=1, seed=3)
    epoch = schedule.epoch(0)
    assert sorted(np.concatenate(epoch).tolist()) == list(range(len(lengths)))
    # short and long examples are not padded to each other: each micro-batch has one width
    assert all(len({padded_length(int(n)) for n in lengths[b]}) == 1 for b in epoch)
    assert [b.tolist() for b in schedule.epoch(1)] != [b.tolist() for b in epoch]  # a new order each epoch
    again = Schedule(lengths, lengths - 1, 4, 1, 1, seed=3)
    assert [b.tolist() for b in again.epoch(0)] == [b.tolist() for b in epoch]  # a function of the seed


def test_an_epoch_is_sorted_by_width_as_a_whole_so_rare_long_examples_meet():
    # 8 long examples of different widths scattered among 500 short ones: sorted over the
    # whole epoch they fill two micro-batches of their own, the 4 shortest and 4 longest
    lengths = np.full(508, 20)
    long = [300, 1000, 400, 900, 500, 700, 600, 800]
    lengths[np.linspace(0, 507, len(long)).astype(int)] = long
    schedule = Schedule(lengths, lengths - 1, micro_batch=4, accumulation=1, world_size=1, seed=7, limit=2048)
    epoch = schedule.epoch(0)
    held = sorted(sorted(lengths[b].tolist()) for b in epoch if lengths[b].max() > 20)
    assert held == [[300, 400, 500, 600], [700, 800, 900, 1000]]
    # in general: the epoch's micro-batches are the width-sorted permutation cut in fours
    widths = np.array([padded_length(int(n), 2048) for n in lengths])
    cut = np.sort(widths).reshape(-1, 4).tolist()
    assert sorted(np.sort(widths[b]).tolist() for b in epoch) == sorted(cut)


def test_copies_of_a_repeated_example_share_a_micro_batch_only_when_their_width_runs_out_of_others():
    # 8 pairs of one width repeated 12 times among 200 other examples of that width: by
    # width alone, copies of a pair meet in micro-batches; sorted by sighting they do not
    originals = np.concatenate([np.repeat(np.arange(8), 12), np.arange(8, 208)])
    lengths = np.full(len(originals), 70)
    apart = Schedule(lengths, lengths - 1, 4, 1, 1, seed=11, originals=originals)
    widths_only = Schedule(lengths, lengths - 1, 4, 1, 1, seed=11)

    def meetings(schedule: Schedule) -> int:
        return sum(len(set(originals[b].tolist())) < len(b) for b in schedule.epoch(0))

    assert meetings(widths_only) > 0 and meetings(apart) == 0
    assert sorted(np.concatenate(apart.epoch(0)).tolist()) == list(range(len(lengths)))  # each example once
    # a width with fewer originals than a micro-batch holds: its copies have to meet
    few = Schedule(np.full(12, 70), np.full(12, 69), 4, 1, 1, seed=0, originals=np.repeat([0, 1], 6))
    assert all(len(set(np.repeat([0, 1], 6)[b].tolist())) == 2 for b in few.epoch(0))


def test_sightings_count_earlier_copies():
    assert sightings(np.array([5, 3, 5, 5, 3, 9])).tolist() == [0, 0, 1, 2, 1, 0]


def test_ranks_share_a_step_as_one_process_accumulating_it():
    lengths = np.arange(1, 41)
    one = Schedule(lengths, lengths - 1, micro_batch=2, accumulation=4, world_size=1, seed=5)
    two = [Schedule(lengths, lengths - 1, micro_batch=2, accumulation=2, world_size=2, seed=5) for _ in range(2)]
    for s in range(3):
        alone = one.step(s, 0)
        shares = [two[r].step(s, r) for r in range(2)]
        merged = sorted((j, b.tolist()) for share in shares for j, b in share.micro_batches)
        assert merged == [(j, b.tolist()) for j, b in alone.micro_batches]
        assert [j % 2 for j, _ in shares[1].micro_batches] == [1, 1]  # rank 1 takes the odd ones
        # every rank divides by the loss tokens of the whole step
        assert shares[0].loss_tokens == shares[1].loss_tokens == alone.loss_tokens
        assert alone.loss_tokens == sum(int((lengths[b] - 1).sum()) for _, b in alone.micro_batches)


def test_steps_cover_the_epochs_asked_for():
    schedule = Schedule(np.full(10, 8), np.full(10, 7), micro_batch=3, accumulation=2, world_size=1, seed=0)
    assert schedule.micro_batches_per_epoch == 4
    assert schedule.steps_for(1.0) == 2 and schedule.steps_for(2.5) == 5
    # an epoch's short last micro-batch counts: 5 examples in 4s are 2 micro-batches an epoch
    assert epoch_steps(5, micro_batch=4, micro_batches_per_step=1, epochs=2.0) == 4
    with pytest.raises(ValueError, match="no training examples"):
        Schedule(np.zeros(0), np.zeros(0), 1, 1, 1, 0)


def test_one_process_accumulating_equals_bigger_micro_batches_up_to_rounding():
    # 2 micro-batches of 2 accumulated are one step over the same 4 examples as a micro-batch of 4
    hyper = tiny_hyper(max_steps=1, batch_size=2, gradient_accumulation_steps=2)
    accumulated = lora_weights(train_tiny(ROWS[:4], hyper=hyper))
    hyper = tiny_hyper(max_steps=1, batch_size=4, gradient_accumulation_steps=1)
    whole = lora_weights(train_tiny(ROWS[:4], hyper=hyper))
    assert all(torch.allclose(accumulated[k], whole[k], atol=1e-6) for k in whole)


def test_a_resumed_run_ends_with_the_bytes_and_the_loss_of_an_uninterrupted_one(tmp_path: Path):
    hyper = tiny_hyper(max_steps=4, lora_dropout=0.1)
    straight = train_tiny(ROWS, hyper=hyper)
    folder = tmp_path / "checkpoints"
    sink = Steps()

    class Interrupt(Steps):
        def on_step(self, step, loss, *rest) -> None:  # noqa: ANN001
            super().on_step(step, loss, *rest)
            if step == 3:
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_tiny(ROWS, hyper=hyper, sink=Interrupt(), checkpoints=folder, every=Every(steps=2))
    kept = latest_checkpoint(folder)
    assert kept is not None and kept.name == "step-000002"
    resumed = train_tiny(ROWS, hyper=hyper, sink=sink, checkpoints=folder, every=Every(steps=2), resume_from=kept)
    assert [step for step, _ in sink.losses] == [3, 4] and resumed.steps == 4
    want, got = lora_weights(straight), lora_weights(resumed)
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)
    assert resumed.train_loss == straight.train_loss  # the steps before the checkpoint count too
    assert resumed.tokens_seen == straight.tokens_seen and resumed.tokens_before > 0


def test_each_step_reports_its_loss_by_row_kind():
    sink = Steps()
    kinds = ["prose", "instruction"] * 4
    result = train_tiny(ROWS, hyper=tiny_hyper(max_steps=2, batch_size=4), sink=sink, kinds=kinds)
    assert [step for step, _ in sink.kinds] == [1, 2]
    for (_, loss), (_, by_kind) in zip(sink.losses, sink.kinds, strict=True):
        assert set(by_kind) <= {"prose", "instruction"} and by_kind
        tokens = sum(n for _, n in by_kind.values())
        mean = sum(value * n for value, n in by_kind.values()) / tokens
        assert mean == pytest.approx(loss, rel=1e-5)  # the kinds split the step's loss
    assert result.loss_tokens == sum(len(r) - 1 for r in ROWS)


def test_a_measurement_runs_between_steps_and_can_stop_the_run():
    seen: list[tuple[int, bool]] = []

    class StopAtTwo:
        def due(self, step, max_steps) -> bool:  # noqa: ANN001
            return step < max_steps

        def between_steps(self, model, step) -> bool:  # noqa: ANN001
            seen.append((step, model.training))
            return step == 2

        def save(self, folder) -> None:  # noqa: ANN001
            pass

        def load(self, folder) -> None:  # noqa: ANN001
            pass

    result = train_tiny(ROWS, hyper=tiny_hyper(max_steps=5), measurements=[StopAtTwo()])
    assert result.steps == 2 and seen == [(1, True), (2, True)]


def test_checkpoints_are_published_whole_and_only_the_latest_is_kept(tmp_path: Path):
    folder = tmp_path / "checkpoints"
    saved: list[int] = []
    train_tiny(
        ROWS,
        hyper=tiny_hyper(max_steps=3),
        checkpoints=folder,
        every=Every(steps=1),
        on_checkpoint=lambda step, path: saved.append(step),
    )
    assert saved == [1, 2]  # never at the last step, whose adapter is published instead
    kept = latest_checkpoint(folder)
    assert kept is not None and kept.name == "step-000002"
    names = {p.name for p in kept.iterdir()}
    assert {"adapter_model.safetensors", "optimizer.pt", "scheduler.pt", "state.json"} <= names
    assert [p.name for p in folder.iterdir() if p.name.startswith("step-")] == ["step-000002"]
    assert not list(tmp_path.glob(".checkpoint-*"))  # no scratch folder left behind


def test_the_probe_tracker_keeps_its_best_adapter_across_a_checkpoint(tmp_path: Path):
    from dlm.judge.track import ProbeTracker

    tracker = ProbeTracker([], every_steps=1, pad_id=0, patience=3, keep=True)
    tracker.scores = [(1, -2.0), (2, -1.5)]
    tracker.best_step, tracker.best_score, tracker._since_best = 2, -1.5, 0
    tracker._best_state = {"lora_A": torch.arange(6.0).view(2, 3)}
    tracker.save(tmp_path)
    back = ProbeTracker([], every_steps=1, pad_id=0, patience=3, keep=True)
    back.load(tmp_path)
    assert back.scores == tracker.scores and (back.best_step, back.best_score) == (2, -1.5)
    assert back._best_state is not None and torch.equal(back._best_state["lora_A"], tracker._best_state["lora_A"])
    fresh = ProbeTracker([], every_steps=1, pad_id=0)
    fresh.load(tmp_path / "missing")  # a checkpoint without a tracker file: nothing to read
    assert fresh.scores == []


def test_the_loop_reads_no_loss_off_the_device_before_the_next_step_is_queued(monkeypatch):
    # one step late (module docstring): step 1's loss is logged only after step 2 ran
    events: list[str] = []
    import dlm.train.loop as loop

    real = loop.micro_batch

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003
        events.append("batch")
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "micro_batch", spy)
    sink = SimpleNamespace(on_train_start=lambda total: None, on_step=lambda step, *rest: events.append(f"log {step}"))
    train_tiny(ROWS, hyper=tiny_hyper(max_steps=3), sink=sink)
    assert events == ["batch", "batch", "log 1", "batch", "log 2", "log 3"]

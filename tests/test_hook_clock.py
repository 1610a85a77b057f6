"""`HookClock`: the time spent in a trainer's measurement hooks is counted apart from
the steps, and the hooks behave as they did unwrapped."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from transformers import TrainerCallback, TrainerControl

import dlm.train.lora as lora
from dlm.train.lora import HookClock, LoraResult


class _Stopper(TrainerCallback):
    def __init__(self) -> None:
        self.seen: list[tuple[str, int]] = []

    def on_step_end(self, args, state, control, **kwargs):  # noqa: ANN001
        self.seen.append(("step_end", state.global_step))
        control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
        self.seen.append(("log", logs["loss"]))


def test_wrapped_hooks_relay_events_and_controls_and_add_up_their_time(monkeypatch) -> None:
    ticks = iter(range(0, 100, 5))  # each reading of the clock is 5 s after the last
    monkeypatch.setattr(lora.time, "perf_counter", lambda: float(next(ticks)))
    clock = HookClock()
    inner = _Stopper()
    (wrapped,) = clock.timed([inner])
    args: Any = None
    assert isinstance(wrapped, TrainerCallback) and type(wrapped).__name__ == "Timed_Stopper"
    state: Any = SimpleNamespace(global_step=3)
    control = TrainerControl()
    returned = wrapped.on_step_end(args, state, control, model=None)
    assert returned is control and control.should_training_stop
    assert wrapped.on_log(args, state, control, logs={"loss": 1.5}) is None
    assert wrapped.on_train_begin(args, state, control) is None  # an event the hook does not handle
    assert inner.seen == [("step_end", 3), ("log", 1.5)]
    assert clock.seconds == 15.0  # three events, 5 s each


def test_the_step_rate_leaves_out_the_hooks_time() -> None:
    result = LoraResult(model=None, steps=4, train_loss=1.0, tokens_seen=600, seconds=10.0, hook_seconds=4.0)
    assert result.step_seconds == 6.0 and result.tokens_per_second == 100.0
    assert LoraResult(None, 1, None, 10, 2.0, hook_seconds=2.5).tokens_per_second is None

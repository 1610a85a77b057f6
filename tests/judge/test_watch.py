"""`dlm train --watch`: two real cycles around a real edit; Ctrl-C keeps the last good adapter."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from dlm.actions.training import NullSink, TrainOptions, train_document
from dlm.actions.watching import Cycle, watch_and_train
from dlm.store import open_store

DOC = """---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8Z
dlm_version: 1
base_model: smollm2-135m
training:
  batch_size: 1
  sequence_len: 32
  max_steps: 1
  replay: 0  # the cache counts below are the document's rows alone
  synth:
    enabled: false
  eval:
    judge: false  # the probe report has its own tests (tests/judge/test_eval_cli.py)
---

::instruction::

### Q
What is the capital of Merrow?

### A
ANSWER

### Q
Who founded Merrow?

### A
A shipwright named Ansel Dray.
"""


@pytest.mark.integration
def test_an_edit_starts_a_second_cycle_that_reuses_the_cache(tmp_path: Path, smollm2_ref):
    path = tmp_path / "merrow.dlm"
    path.write_text(DOC.replace("ANSWER", "Port Sella."))
    stop = threading.Event()
    guard = threading.Timer(600, stop.set)  # never hang the suite
    guard.start()
    cycles: list[Cycle] = []

    def on_cycle(cycle: Cycle) -> None:
        cycles.append(cycle)
        if cycle.number == 1:
            path.write_text(DOC.replace("ANSWER", "Port Sella, on the east shore."))
        else:
            stop.set()

    try:
        summary = watch_and_train(
            path,
            lambda doc: train_document(doc, TrainOptions(), NullSink()),
            on_cycle,
            stop_event=stop,
            debounce_ms=200,
        )
    finally:
        guard.cancel()
    assert summary.cycles == 2 and not summary.interrupted and summary.current_version == "v0002"
    first, second = (c.report for c in cycles)
    assert cycles[0].changed == [] and cycles[1].changed == [str(path.resolve())]
    assert first.tokenization["cache_misses"] == 2
    assert second.tokenization["cache_hits"] == 1 and second.tokenization["cache_misses"] == 1
    store = open_store(first.dlm_id)
    assert store.versions() == ["v0001", "v0002"] and store.current_version() == "v0002"


class Report:
    def __init__(self, version: str) -> None:
        self.adapter_version = version


def test_ctrl_c_inside_a_cycle_ends_cleanly_with_the_last_good_version(tmp_path: Path):
    path = tmp_path / "merrow.dlm"
    path.write_text(DOC.replace("ANSWER", "Port Sella."))
    calls = []

    def train(doc):
        calls.append(doc)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return Report("v0001")

    def on_cycle(cycle: Cycle) -> None:
        path.write_text(DOC.replace("ANSWER", "Elsewhere."))

    summary = watch_and_train(path, train, on_cycle, debounce_ms=100)
    assert summary.interrupted and summary.cycles == 2 and summary.current_version == "v0001"


def test_a_broken_edit_is_reported_and_watching_goes_on(tmp_path: Path):
    path = tmp_path / "merrow.dlm"
    path.write_text(DOC.replace("ANSWER", "Port Sella."))
    stop = threading.Event()
    seen: list[Cycle] = []

    def on_cycle(cycle: Cycle) -> None:
        seen.append(cycle)
        if cycle.number == 1:
            path.write_text(DOC.replace("max_steps: 1", "max_steps: lots"))
        elif cycle.number == 2:
            path.write_text(DOC.replace("ANSWER", "Port Sella again."))
        else:
            stop.set()

    summary = watch_and_train(
        path, lambda doc: Report(f"v000{len(seen) + 1}"), on_cycle, stop_event=stop, debounce_ms=100
    )
    assert [c.error is not None for c in seen] == [False, True, False]
    assert "max_steps" in seen[1].error and summary.current_version == "v0003"

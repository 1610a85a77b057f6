"""The loss plot (a real PNG from matplotlib) and the plain progress lines."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg

from dlm.cli.progress import PlainTrainSink, eta_seconds, format_eta, format_eval_line
from dlm.metrics.plot import DPI, HEIGHT_IN, WIDTH_IN, ema, render_loss_plot


def run(run_id: str, losses: list[float], evals: list[tuple[str, int, float]]) -> dict:
    return {
        "run_id": run_id,
        "adapter_version": f"v{run_id}",
        "steps_logged": [{"step": i + 1, "loss": v} for i, v in enumerate(losses)],
        "evals": [{"phase": p, "step": s, "loss": v} for p, s, v in evals],
    }


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_plot_is_a_png_of_the_set_size_and_shows_the_held_out_series(tmp_path: Path):
    losses = [3.0 - 0.05 * i + 0.2 * ((i * 7) % 3) for i in range(40)]
    with_eval = [
        run("0001", losses, [("before", 0, 2.9), ("step", 20, 2.5), ("after", 40, 2.2)]),
        run("0002", losses[:20], [("before", 0, 2.9), ("after", 20, 2.6)]),
    ]
    without = [dict(r, evals=[]) for r in with_eval]
    a = render_loss_plot(with_eval, tmp_path / "a.png", title="doc")
    b = render_loss_plot(without, tmp_path / "b.png", title="doc")
    assert png_size(a) == png_size(b) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))
    pa, pb = mpimg.imread(a), mpimg.imread(b)
    differing = np.abs(pa - pb).sum(axis=-1) > 0.1
    assert differing.sum() > 500  # the held-out markers, lines and arrows
    assert not list(tmp_path.glob(".*"))  # atomic write left no temporary file


def test_plot_with_no_runs_still_renders(tmp_path: Path):
    assert png_size(render_loss_plot([], tmp_path / "empty.png")) == (int(WIDTH_IN * DPI), int(HEIGHT_IN * DPI))


def test_ema_starts_at_the_first_value_and_smooths():
    assert ema([2.0, 2.0, 2.0]) == pytest.approx([2.0, 2.0, 2.0])
    smoothed = ema([1.0, 3.0] * 20)
    assert max(smoothed[10:]) - min(smoothed[10:]) < 0.5


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_sink_prints_at_a_steady_interval_with_a_token_eta():
    out, clock = io.StringIO(), Clock()
    sink = PlainTrainSink(out, interval_s=10, clock=clock)
    sink.on_plan(10_000)
    sink.on_train_start(100)
    for step in range(1, 101):
        clock.now = step * 1.0  # one step per second
        sink.on_step(step, 2.0, 100.0, 1e-4, step * 100, clock.now)
    lines = out.getvalue().splitlines()
    assert lines[0] == "train: 100 steps, about 10,000 tokens"
    steps = [line for line in lines if line.startswith("step ")]
    assert steps[0].startswith("step 1/100  loss 2.0000  100 tok/s")
    assert steps[-1].startswith("step 100/100")
    assert len(steps) == 11  # step 1, then every 10 s, and the last
    assert "ETA 0:00:49" in [s for s in steps if s.startswith("step 51/")][0]


def test_eta_comes_from_tokens():
    assert eta_seconds(1000, 250, 50.0) == 15.0
    assert eta_seconds(None, 250, 50.0) is None and format_eta(None) == "?"
    assert format_eta(3725) == "1:02:05"


def test_held_out_line_reads_like_the_docs():
    line = format_eval_line({"loss": 2.69, "perplexity": 14.73}, {"loss": 2.41, "perplexity": 11.13}, 256, 120_400)
    assert line == "held-out loss 2.69 -> 2.41 (perplexity 14.7 -> 11.1, 256 rows, 120K tokens)"

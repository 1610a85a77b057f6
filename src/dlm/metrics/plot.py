"""`dlm metrics DOC --plot FILE.png`: loss curves of a document's runs as a PNG.

Left panel: train loss per optimizer step (raw, faint; smoothed with an exponential
moving average, solid), the train loss of each row kind (smoothed; dotted for prose,
dash-dot for instruction, dashed for source, in the run's colour), the held-out loss measurements (markers at the step they
were taken: before the first step, every `every_steps`, after the last) and, on a
second axis, the probes' answer log-probability per token during training (triangles). Right panel:
held-out loss before and after each run, run by run, so runs compare at a glance.
Losses are mean cross-entropy in nats per loss-carrying token.

Rendered with matplotlib's Agg backend (no display needed) into memory and written
through the atomic-write helper, so a half-written image is never left behind.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from dlm.atomic import atomic_write_bytes

SMOOTHING = 0.8
WIDTH_IN, HEIGHT_IN, DPI = 11.0, 4.2, 100
KIND_STYLES = {"prose": ":", "instruction": "-.", "source": (0, (5, 2)), "synth": "--", "replay": (0, (1, 3))}


def ema(values: list[float], weight: float = SMOOTHING) -> list[float]:
    """Exponential moving average with bias correction (the first value is not pulled to 0)."""
    out, avg = [], 0.0
    for i, v in enumerate(values, start=1):
        avg = weight * avg + (1 - weight) * v
        out.append(avg / (1 - weight**i))
    return out


def render_loss_plot(runs: list[dict[str, Any]], path: Path, title: str = "") -> Path:
    """Write the two-panel PNG of `runs` (as `MetricsDB.runs()` returns them) to `path`.

    Returns `path`. Runs without logged steps or held-out measurements are left out of
    the panels they have nothing for.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), dpi=DPI)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [2.2, 1]})
    colors = [f"C{i % 10}" for i in range(len(runs))]
    for run, color in zip(runs, colors, strict=False):
        label = f"{run['adapter_version'] or run['run_id'][-6:]}"
        steps = [s for s in run["steps_logged"] if s["loss"] is not None]
        if steps:
            xs, ys = [s["step"] for s in steps], [s["loss"] for s in steps]
            left.plot(xs, ys, color=color, alpha=0.25, linewidth=1)
            left.plot(xs, ema(ys), color=color, linewidth=2, label=f"{label} train (smoothed)")
        for kind, style in KIND_STYLES.items():
            points = [k for k in run.get("kind_losses") or [] if k["kind"] == kind]
            if points:
                left.plot(
                    [k["step"] for k in points],
                    ema([k["loss"] for k in points]),
                    color=color,
                    linestyle=style,
                    linewidth=1.5,
                    label=f"{label} {kind}",
                )
        evals = run.get("evals") or []
        if evals:
            left.plot(
                [e["step"] for e in evals],
                [e["loss"] for e in evals],
                color=color,
                marker="o",
                linestyle="--",
                label=f"{label} held-out",
            )
    scored = [(run, color) for run, color in zip(runs, colors, strict=False) if run.get("probe_scores")]
    if scored:
        probe_axis = left.twinx()
        for run, color in scored:
            points = run["probe_scores"]
            probe_axis.plot(
                [p["step"] for p in points],
                [p["answer_logprob"] for p in points],
                color=color,
                marker="^",
                linestyle=":",
                label="probe answers",
            )
        probe_axis.set_ylabel("probe answer log-prob per token (higher is better)")
    left.set_xlabel("optimizer step")
    left.set_ylabel("loss (nats per token)")
    left.set_title("train and held-out loss")
    if left.lines:
        left.legend(fontsize="small")
    judged = [(i, r) for i, r in enumerate(runs) if r.get("evals")]
    for i, run in judged:
        before = [e["loss"] for e in run["evals"] if e["phase"] == "before"]
        after = [e["loss"] for e in run["evals"] if e["phase"] == "after"]
        if before:
            right.plot([i + 1], before, marker="o", color="0.5", linestyle="none")
        if after:
            right.plot([i + 1], after, marker="o", color=colors[i], linestyle="none")
        if before and after:
            right.annotate(
                "", xy=(i + 1, after[0]), xytext=(i + 1, before[0]), arrowprops={"arrowstyle": "->", "color": colors[i]}
            )
    right.set_xlabel("run (oldest first)")
    right.set_ylabel("held-out loss (nats per token)")
    right.set_title("held-out loss: before (grey) -> after")
    if not judged:
        right.text(0.5, 0.5, "no held-out measurements", ha="center", va="center", transform=right.transAxes)
    else:
        right.set_xticks([i + 1 for i, _ in judged])
        right.set_xlim(0.5, len(runs) + 0.5)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    atomic_write_bytes(path, buffer.getvalue())
    return path

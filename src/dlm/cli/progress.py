"""Rendering of `train_document`'s progress.

On a terminal: rich bars on stderr (tokenize, then train). The train bar counts tokens,
not steps: examples differ in length, so a step-based ETA jumps; every example's length
is known before step 1 (`on_plan`), so the bar's total is the run's planned tokens and
its ETA follows the measured tokens/s.

When stdout is not a terminal (a log file, CI), `PlainTrainSink` prints one plain line
at a steady interval instead: step, loss, tokens/s and ETA, so a log shows progress.

Both show the step's train loss per row kind next to the overall loss
(`instruction 0.41  prose 2.10  source 1.83`): the overall loss mixes kinds in the
proportions of each batch, so only the per-kind numbers say what is being learned.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO, Any

from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dlm.cli.reporter import err_console, note_line, warn_line

PLAIN_INTERVAL_S = 10.0


def eta_seconds(planned_tokens: int | None, tokens_seen: int, tokens_per_second: float | None) -> float | None:
    """Seconds left at the measured rate, or None when the plan or the rate is unknown."""
    if not planned_tokens or not tokens_per_second:
        return None
    return max(planned_tokens - tokens_seen, 0) / tokens_per_second


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def format_eval_line(before: dict[str, Any] | None, after: dict[str, Any] | None, rows: int, tokens: int) -> str:
    """`held-out loss 2.69 -> 2.41 (perplexity 14.7 -> 11.1, 256 rows, 120K tokens)`."""

    def loss(m: dict[str, Any] | None) -> str:
        return f"{m['loss']:.2f}" if m else "?"

    def ppl(m: dict[str, Any] | None) -> str:
        return f"{m['perplexity']:.1f}" if m else "?"

    return (
        f"held-out loss {loss(before)} -> {loss(after)} (perplexity {ppl(before)} -> {ppl(after)}, "
        f"{rows} rows, {_short(tokens)} tokens)"
    )


def dry_run_lines(plan: Any) -> list[str]:
    """What `dlm train --dry-run` prints for a `DryRunReport`."""
    tps = plan.tokens_per_second
    rate = f", {tps:,.0f} tokens/s" if tps and tps >= 100 else f", {tps:.1f} tokens/s" if tps else ""
    drawn, facts = plan.drawn, plan.synth_by_source
    lines = [
        f"steps: {plan.steps} ({plan.steps_reason})",
        f"tokens: {plan.planned_tokens:,} in {plan.examples} examples (padding excluded)",
    ]
    if drawn:
        lines.append("drawn: " + ", ".join(f"{n:,} {kind}" for kind, n in sorted(drawn.items())))
    if facts:
        lines.append(
            "synth pairs by source: "
            + ", ".join(
                f"{kind} {c['pairs']}" + (f" (+{c['probes']} probes)" if c["probes"] else "")
                for kind, c in facts.items()
            )
        )
    if plan.replay_share:
        lines.append(
            f"replay: {plan.replay_share:.0%} of the examples drawn are general questions the base model answered"
            + (", trained on the KL to its next-token distribution" if plan.replay_loss == "kl" else "")
            + (f", their loss weighted {plan.replay_weight:g}x" if plan.replay_weight != 1.0 else "")
        )
    lines.append(
        f"ETA: {format_eta(plan.eta_seconds)} for training, measured: {plan.measured_steps} real steps on this "
        f"machine ({plan.device}), {plan.seconds_per_step:.2f} s/step{rate}"
    )
    if plan.report_seconds is None:
        return [*lines, "held-out scoring not included; no probe report after training (training.eval.judge: false)"]
    flip = (
        f", and {format_eta(plan.flip_seconds)} more for each general probe the adapter gets wrong (drawn replies confirm it)"
        if plan.flip_seconds
        else ""
    )
    return [
        *lines,
        f"then the probe report: about {format_eta(plan.report_seconds)}, measured here{flip}; "
        f"in all about {format_eta(plan.eta_seconds + plan.report_seconds)}, held-out scoring not included",
    ]


def format_kind_losses(losses: dict[str, float] | None) -> str:
    """`instruction 0.41  prose 2.10  source 1.83  replay 0.95` (kinds in a fixed order; "" for none)."""
    if not losses:
        return ""
    return "  ".join(
        f"{kind} {losses[kind]:.2f}" for kind in ("instruction", "synth", "prose", "source", "replay") if kind in losses
    )


def _short(n: int) -> str:
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f}M"
    if n >= 1000:
        return f"{n / 1000:.0f}K"
    return str(n)


class RichTrainSink:
    """A `TrainSink` drawing progress bars on stderr (silent when `quiet`)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err_console,
            disable=quiet,
            transient=False,
        )
        self.task: Any = None
        self.planned: int | None = None
        self.total_steps = 0
        self.kinds: dict[str, float] | None = None
        self.progress.start()

    def close(self) -> None:
        self.progress.stop()

    def start(self, description: str, total: int) -> None:
        self.task = self.progress.add_task(description, total=total, info="")

    def advance(self, n: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)

    def on_plan(self, total_tokens: int) -> None:
        self.planned = total_tokens or None

    def on_train_start(self, total_steps: int) -> None:
        self.total_steps = total_steps
        self.task = self.progress.add_task("train", total=self.planned or total_steps, info=f"step 0/{total_steps}")

    def on_step(
        self,
        step: int,
        loss: float | None,
        tokens_per_second: float | None,
        learning_rate: float | None = None,
        tokens_seen: int = 0,
        *_: Any,
    ) -> None:
        info = f"step {step}/{self.total_steps}"
        if loss is not None:
            info += f"  loss {loss:.4f}"
        if self.kinds:
            info += f" ({format_kind_losses(self.kinds)})"
        if tokens_per_second:
            info += f"  {tokens_per_second:,.0f} tok/s"
        done = min(tokens_seen, self.planned) if self.planned else step
        self.progress.update(self.task, completed=done, info=info)

    def on_kind_loss(self, step: int, losses: dict[str, float]) -> None:
        self.kinds = losses

    def on_eval(self, phase: str, step: int, result: Any) -> None:
        if not self.quiet:
            err_console.print(f"held-out loss {result.loss:.4f} at step {step} ({phase})")

    def on_message(self, text: str) -> None:
        if not self.quiet:
            warn_line(text)

    def on_note(self, text: str) -> None:
        if not self.quiet:
            note_line(text)


class PlainTrainSink:
    """A `TrainSink` writing plain lines to `stream`, a training line at most every
    `interval_s` seconds (and always the first and the last step)."""

    def __init__(
        self,
        stream: IO[str] | None = None,
        interval_s: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream or sys.stdout
        self.interval_s, self.clock = interval_s, clock
        self.planned: int | None = None
        self.total_steps = 0
        self.last_print: float | None = None
        self.description = ""
        self.total = self.done = 0
        self.kinds: dict[str, float] | None = None

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        pass

    def start(self, description: str, total: int) -> None:
        self.description, self.total, self.done = description, total, 0
        self._line(f"{description}: {total} rows")

    def advance(self, n: int) -> None:
        self.done += n

    def on_plan(self, total_tokens: int) -> None:
        self.planned = total_tokens or None

    def on_train_start(self, total_steps: int) -> None:
        self.total_steps = total_steps
        planned = f", about {self.planned:,} tokens" if self.planned else ""
        self._line(f"train: {total_steps} steps{planned}")

    def on_step(
        self,
        step: int,
        loss: float | None,
        tokens_per_second: float | None,
        learning_rate: float | None = None,
        tokens_seen: int = 0,
        *_: Any,
    ) -> None:
        now = self.clock()
        due = self.last_print is None or now - self.last_print >= self.interval_s
        if not (due or step >= self.total_steps):
            return
        self.last_print = now
        loss_text = f"{loss:.4f}" if loss is not None else "n/a"
        tps = f"{tokens_per_second:,.0f}" if tokens_per_second else "n/a"
        eta = format_eta(eta_seconds(self.planned, tokens_seen, tokens_per_second))
        kinds = f" ({format_kind_losses(self.kinds)})" if self.kinds else ""
        self._line(f"step {step}/{self.total_steps}  loss {loss_text}{kinds}  {tps} tok/s  ETA {eta}")

    def on_kind_loss(self, step: int, losses: dict[str, float]) -> None:
        self.kinds = losses

    def on_eval(self, phase: str, step: int, result: Any) -> None:
        self._line(f"held-out loss {result.loss:.4f} at step {step} ({phase})")

    def on_message(self, text: str) -> None:
        warn_line(text)

    def on_note(self, text: str) -> None:
        note_line(text)


def make_train_sink(json_out: bool) -> RichTrainSink | PlainTrainSink:
    """Bars on a terminal, plain lines when stdout is not one, nothing with `--json`."""
    if json_out:
        return RichTrainSink(quiet=True)
    if sys.stdout.isatty():
        return RichTrainSink()
    return PlainTrainSink(sys.stdout)

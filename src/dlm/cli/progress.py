"""Rich rendering of `train_document`'s progress: tokenize bar, then training bar."""

from __future__ import annotations

from typing import Any

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from dlm.cli.reporter import err_console, warn_line


class RichTrainSink:
    """A `TrainSink` drawing progress bars on stderr (silent when `quiet`)."""

    def __init__(self, quiet: bool = False) -> None:
        self.quiet = quiet
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=err_console,
            disable=quiet,
            transient=False,
        )
        self.task: Any = None
        self.progress.start()

    def close(self) -> None:
        self.progress.stop()

    def start(self, description: str, total: int) -> None:
        self.task = self.progress.add_task(description, total=total, info="")

    def advance(self, n: int) -> None:
        if self.task is not None:
            self.progress.advance(self.task, n)

    def on_train_start(self, total_steps: int) -> None:
        self.task = self.progress.add_task("train", total=total_steps, info="")

    def on_step(self, step: int, loss: float | None, tokens_per_second: float | None, *_: Any) -> None:
        info = f"loss {loss:.4f}" if loss is not None else ""
        if tokens_per_second:
            info += f"  {tokens_per_second:,.0f} tok/s"
        self.progress.update(self.task, completed=step, info=info)

    def on_message(self, text: str) -> None:
        if not self.quiet:
            warn_line(text)

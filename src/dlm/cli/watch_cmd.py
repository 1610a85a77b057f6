"""`dlm train --watch`: the command side of `dlm.actions.watching` (sink, rendering, exit)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dlm.cli.reporter import console


def run_watch(path: Path, *, json_out: bool, **train_options: Any) -> None:
    """Train, then re-train on every change until Ctrl-C; each cycle is printed as it ends.

    Ctrl-C exits 0 after saying which adapter is current: the session, not a run, ended.
    """
    from dlm.actions.watching import watch
    from dlm.cli.judge_render import print_cycle
    from dlm.cli.progress import make_train_sink

    sink = make_train_sink(json_out)
    try:
        summary = watch(path, on_cycle=lambda cycle: print_cycle(cycle, json_out), sink=sink, **train_options)
    finally:
        sink.close()
    if not json_out:
        current = summary.current_version or "none (no cycle finished)"
        console.print(f"stopped watching after {summary.cycles} cycles; adapter {current} is current")

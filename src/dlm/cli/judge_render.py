"""Rendering for training you can judge: the held-out line, watch cycles, one row's tokens."""

from __future__ import annotations

from typing import Any

from rich.markup import escape
from rich.table import Table

from dlm.cli.common import print_full_table
from dlm.cli.progress import format_eval_line
from dlm.cli.reporter import console, err_console


def print_heldout(report: Any) -> None:
    """The held-out line and the real-token fraction of a `TrainReport` (nothing when off)."""
    held = report.heldout
    if held:
        console.print(format_eval_line(held["before"], held["after"], held["rows"], held["tokens"]))
        before, after = held["before"] or {}, held["after"] or {}
        if "instruction" in before.get("by_kind", {}) and "instruction" in after.get("by_kind", {}):
            console.print(
                f"held-out answers (Q/A pairs, answer tokens only) loss "
                f"{before['by_kind']['instruction']:.2f} -> {after['by_kind']['instruction']:.2f}"
            )
    else:
        console.print("held-out loss: none (no rows held out; see training.eval in docs/format.md)")
    if report.real_token_fraction is not None:
        padding = getattr(report, "padding_fraction", None)
        padded = f", {padding:.1%} were padding" if padding is not None else ""
        console.print(f"real tokens: {report.real_token_fraction:.1%} of tokens processed carried loss{padded}")


def print_guard(report: Any) -> None:
    """The early stop's measurements of a `TrainReport` (nothing when it did not run)."""
    guard = getattr(report, "guard", None)
    if not guard or not guard["changes"]:
        return
    changes = ", ".join(f"{change:+.1f}% (step {step})" for step, change in guard["changes"])
    console.print(f"general text during training: {changes}; the limit {guard['limit_pct']:g}%")


def print_cycle(cycle: Any, json_out: bool) -> None:
    """One `dlm train --watch` cycle."""
    from dlm.cli.common import print_json

    if json_out:
        print_json(cycle)
        return
    changed = (
        f" ({len(cycle.changed)} changed: {', '.join(cycle.changed[:3])}{' ...' if len(cycle.changed) > 3 else ''})"
        if cycle.changed
        else ""
    )
    if cycle.error:
        err_console.print(
            f"[bold]cycle {cycle.number}[/]{escape(changed)}: [red]{escape(cycle.error)}[/]; still watching"
        )
        return
    report = cycle.report
    tok = report.tokenization
    console.print(
        f"[bold]cycle {cycle.number}[/]{escape(changed)}: tokenize {tok['total_sections']} rows in "
        f"{tok['total_tokenize_seconds']:.2f}s (cache hits {tok['cache_hits']}, misses "
        f"{tok['cache_misses']}); {report.steps} steps; adapter {report.adapter_version}"
    )
    print_heldout(report)
    err_console.print("watching for changes (Ctrl-C to stop)")


def print_row_tokens(view: Any) -> None:
    """A row's tokens: loss-carrying ones in green on a terminal, `|` where an example starts."""
    where = "held out (scored, not trained)" if view.heldout else f"trains ({view.layout})"
    console.print(
        f"[bold]{escape(view.source)}[/] {view.kind} row, {view.n_tokens} tokens, "
        f"prompt {view.n_prompt}, {where}, cuts at {view.cuts[:12]}{' ...' if len(view.cuts) > 12 else ''}"
    )
    table = Table("pos", "id", "piece", "text", "loss", "cut", box=None)
    for t in view.tokens:
        style = "green" if t["loss"] else "dim"
        table.add_row(
            str(t["position"]),
            str(t["id"]),
            escape(t["piece"]),
            f"[{style}]{escape(repr(t['text']))}[/]",
            "yes" if t["loss"] else "",
            "|" if t["cut"] else "",
        )
    print_full_table(table)
    if len(view.tokens) < view.n_tokens:
        console.print(f"... {view.n_tokens - len(view.tokens)} more tokens (--limit)")

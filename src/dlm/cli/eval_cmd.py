"""`dlm eval`: the probe report of an adapter, and the gate a CI job can use.

Thin: `dlm.actions.evaluating.evaluate()` builds the report; this module renders it.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from dlm.cli.common import DocArg, JsonOpt, print_full_table, print_json
from dlm.cli.reporter import console, err_console, reported, warn_line

KIND_NAMES = {"instruction": "instruction pairs (recall)", "probe": "probes", "synth": "code probes"}


def register(app: typer.Typer) -> None:
    """Add the `eval` command to `app`."""
    app.command("eval")(reported(eval_command))


def eval_command(
    path: DocArg,
    adapter_version: Annotated[
        str | None,
        typer.Option(
            "--adapter-version", metavar="vNNNN", help="Evaluate this stored version instead of the current one."
        ),
    ] = None,
    min_pass: Annotated[
        int | None,
        typer.Option(
            "--min-pass",
            min=0,
            help="Exit 1 when the adapter passes fewer probes than this (probes and code probes; instruction pairs when the document has no probes).",
        ),
    ] = None,
    items: Annotated[bool, typer.Option("--items", help="Also list every question with the three answers.")] = False,
    recompute: Annotated[
        bool,
        typer.Option(
            "--recompute",
            help="Score every side afresh instead of reading the report remembered for this adapter (dlm train leaves one).",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Score the adapter against the base model and a null adapter: probes, instruction recall, general ability."""
    from dlm.actions.evaluating import evaluate

    report = evaluate(path, adapter_version=adapter_version, recompute=recompute, notify=warn_line)
    if json_out:
        print_json(report)
    else:
        print_report(report, items)
    if min_pass is not None:
        gated = ("probe", "synth") if report.total(("probe", "synth")) else ("instruction",)
        passed = report.passed("adapter", gated)
        if passed < min_pass:
            err_console.print(
                f"[bold red]error:[/] the adapter passed {passed} of {report.total(gated)} "
                f"{'probes' if gated[0] != 'instruction' else 'instruction pairs'}, "
                f"fewer than --min-pass {min_pass}"
            )
            raise typer.Exit(1)


def print_report(report: Any, items: bool = False) -> None:
    """The report as lines a person reads: one per kind, the guard, warnings."""
    for line in report_lines(report.as_dict()):
        console.print(line)
    for warning in report.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}")
    if items:
        table = Table("kind", "question", "base", "adapter", "null", box=None)
        for item in report.items:
            marks = [
                ("[green]pass[/] " if item.passed[m] else "[red]fail[/] ") + escape(" ".join(item.replies[m].split()))
                for m in ("base", "adapter", "null")
            ]
            table.add_row(item.kind, escape(item.question), *marks)
        for probe in (report.general_probes or {}).get("items", []):
            marks = [
                ("[green]pass[/] " if probe["passed"][m] else "[red]fail[/] ")
                + escape(" ".join(probe["replies"][m].split()))
                for m in ("base", "adapter")
            ]
            table.add_row("general", escape(probe["question"]), *marks, "")
        print_full_table(table)


def report_lines(report: dict[str, Any]) -> list[str]:
    """An `EvalReport` (as a dict) in lines: `probes: 5/8 passed (base 0/8, null adapter 0/8);
    answer log-prob per token -2.91 -> -0.42 (null -3.10)`, then the guard and the general
    probes side by side."""
    lines = [f"evaluation of adapter {report['adapter_version']}:"]
    for kind, s in report["kinds"].items():
        lines.append(
            f"  {KIND_NAMES.get(kind, kind)}: [bold]{s['passed']['adapter']}/{s['total']}[/] passed "
            f"(base {s['passed']['base']}/{s['total']}, null adapter {s['passed']['null']}/{s['total']}); "
            f"answer log-prob per token {s['logprob']['base']:.2f} -> {s['logprob']['adapter']:.2f} "
            f"(null {s['logprob']['null']:.2f})"
        )
    if not report["kinds"]:
        lines.append("  no instruction pairs or probes to score; add a ::probe:: section (docs/evaluation.md)")
    g = report["general"]
    if g:
        lines.append(
            f"  general ability: NLL per token {g['base_nll']:.3f} -> {g['adapter_nll']:.3f} "
            f"({g['change_pct']:+.1f}% on {g['passages']} general passages)"
        )
    p = report.get("general_probes")
    if p:
        lines.append(general_probes_line(p))
    return lines


def general_probes_line(p: dict[str, Any]) -> str:
    """`general probes: passed base 15/16 -> adapter 13/16; NLL per token of the base's
    replies 0.401 -> 0.463 (+15.4%); forgotten: code-add (drawn
    12/16 -> 1/16); not confirmed by drawn replies: unit-cm-in-meter (drawn 4/16 -> 4/16);
    skipped (the base fails them): define-cpu` (`dlm.judge.forgetting` has the rule)."""
    line = f"  general probes: passed base {p['passed']['base']}/{p['total']} -> adapter {p['passed']['adapter']}/{p['total']}"
    if nll := p.get("reply_nll"):
        line += (
            f"; NLL per token of the base's replies {nll['base_nll']:.3f} -> {nll['adapter_nll']:.3f} "
            f"({nll['change_pct']:+.1f}%)"
        )
    drawn = {
        item["id"]: f" (drawn {item['sampled']['passed']['base']}/{n} -> {item['sampled']['passed']['adapter']}/{n})"
        for item in p["items"]
        if "sampled" in item and (n := len(item["sampled"]["replies"]["base"]))
    }
    if p["forgotten"]:
        line += f"; [red]forgotten[/]: {escape(', '.join(pid + drawn.get(pid, '') for pid in p['forgotten']))}"
    tipped = [pid for pid in p.get("flipped", []) if pid not in p["forgotten"]]
    if tipped:
        line += f"; not confirmed by drawn replies: {escape(', '.join(pid + drawn[pid] for pid in tipped))}"
    if p["skipped"]:
        line += f"; skipped (the base fails them): {escape(', '.join(p['skipped']))}"
    return line

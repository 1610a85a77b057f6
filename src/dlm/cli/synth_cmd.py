"""`dlm synth`: the Q/A pairs `training.synth` and its teacher derive, per source unit.

Thin: `dlm.actions.synthesizing.synth_listing()` builds the view; this module renders it.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dlm.cli.common import DocArg, JsonOpt, print_json
from dlm.cli.reporter import console, err_console, reported, warn_line


def register(app: typer.Typer) -> None:
    """Add the `synth` command to `app`."""
    app.command("synth")(reported(synth_command))


def synth_command(
    path: DocArg,
    fetch: Annotated[
        bool,
        typer.Option("--fetch", help="Ask the teacher (training.synth.teacher) for the sections it has not answered."),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """List the Q/A pairs training.synth draws and its teacher wrote, per source unit, for review."""
    from dlm.actions.synthesizing import synth_listing

    def asking(unit: Any) -> None:
        err_console.print(f"asking the teacher about {unit.where}", highlight=False, markup=False)

    view = synth_listing(path, fetch=fetch, on_ask=None if json_out else asking)
    if json_out:
        print_json(view)
        return
    for unit in view.synth:
        console.print(f"{unit.where} (synth)", style="bold", highlight=False, markup=False)
        _pairs(unit.pairs)
        _pairs(unit.probes, "probe ")
    teacher = view.teacher
    if teacher is not None:
        for t in teacher.units:
            extra = f", {t.dropped} dropped" if t.dropped else ""
            console.print(f"{t.where} (teacher, {t.status}{extra})", style="bold", highlight=False, markup=False)
            _pairs(t.pairs)
        missing = sum(t.status == "missing" for t in teacher.units)
        pairs = sum(len(t.pairs) for t in teacher.units)
        console.print(
            f"teacher {teacher.model} at {teacher.url}: {pairs} Q/A from {len(teacher.units)} sections"
            + (f", asked {teacher.asked} now" if teacher.asked else "")
            + (f", {missing} not asked yet (--fetch asks them)" if missing else ""),
            highlight=False,
            markup=False,
        )
    elif not view.synth:
        console.print("training.synth draws no pairs and no teacher is set", highlight=False, markup=False)
    for note in view.notes:
        warn_line(note)


def _pairs(pairs: list[Any], tag: str = "") -> None:
    for qa in pairs:
        console.print(f"  {tag}Q: {qa.question}", highlight=False, markup=False)
        console.print(f"  {tag}A: {qa.answer}", highlight=False, markup=False)

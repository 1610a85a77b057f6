"""`dlm doctor`: hardware, determinism tier and class, pinned versions.

Thin: `dlm.actions.doctor()` builds the data; this module only renders it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from dlm.cli.common import JsonOpt, print_json, print_table
from dlm.cli.reporter import reported

SOURCES = {
    "probe": "probe (read without importing torch; --torch asks torch)",
    "torch": "torch (asked torch)",
}


def register(app: typer.Typer) -> None:
    """Add the `doctor` command to `app`."""
    app.command("doctor")(reported(doctor))


def doctor(
    nproc: Annotated[
        int | None, typer.Option("--nproc", min=1, help="Also show the plan of dlm train --nproc N on this machine.")
    ] = None,
    ask_torch: Annotated[
        bool,
        typer.Option("--torch", help="Ask torch (imports it, about 2 s) instead of reading the machine without it."),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show this machine's hardware tier, the determinism class `dlm train` records, and versions."""
    from dlm.actions.diagnostics import doctor as doctor_action

    view = doctor_action(nproc=nproc, ask_torch=ask_torch)
    if json_out:
        print_json(view)
        return
    rows = [
        ("dlm", view.dlm_version),
        ("python", view.python_version),
        ("platform", f"{view.system} {view.machine}, CPU {view.cpu_capability}, {view.torch_threads} torch threads"),
        ("cpu isa", view.cpu_isa),
        ("hardware", view.hardware_tier + (f" ({view.accelerator})" if view.accelerator else "")),
        ("cuda / rocm", f"{view.cuda_version or '-'} / {view.rocm_version or '-'}"),
        ("determinism", f"[bold]{view.determinism_class}[/]: {view.promise}"),
        ("switches", ", ".join(f"{k}={v}" for k, v in sorted(view.determinism_flags.items()))),
        ("source", SOURCES.get(view.source, view.source)),
    ]
    if view.precision is not None:
        pr = view.precision
        cpu = ", ".join(pr["cpu_bf16"]) or "no AVX512-BF16/AMX"  # type: ignore[arg-type]
        gpu = "" if pr["cuda_bf16"] is None else f", GPU bf16 {'yes' if pr['cuda_bf16'] else 'no'}"
        rows.append(("bf16", f"CPU {cpu}{gpu}; precision: auto trains in {pr['auto']}"))
    if view.plan is not None:
        p = view.plan
        rows.append(
            (
                "--nproc plan",
                (
                    f"{p['world_size']} ranks on {p['device']} ({p['backend']}), {p['threads_per_rank']} threads each; "
                    f"{p['per_device_batch_size']} rows per micro-batch x {p['gradient_accumulation_steps']} accumulation "
                    f"x {p['world_size']} ranks = {p['rows_per_step']} rows per step (document defaults)"
                ),
            )
        )
        rows += [("note", note) for note in p["notes"]]  # type: ignore[attr-defined]
    rows += [(name, version) for name, version in sorted(view.versions.items())]
    print_table(rows)

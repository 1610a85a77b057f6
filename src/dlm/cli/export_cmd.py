"""`dlm export`: write the adapter for llama.cpp, Ollama, vLLM or transformers.

Thin: `dlm.actions.exporting.export` does the work; this module parses flags and renders
the `ExportReport`. A failed `--verify` exits 1 after printing its numbers (the export
itself stays written).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from dlm.cli.common import DocArg, JsonOpt, print_json, print_table
from dlm.cli.reporter import reported


class Format(str, Enum):
    gguf = "gguf"
    ollama = "ollama"
    merged = "merged"
    peft = "peft"


def register(app: typer.Typer) -> None:
    """Add the `export` command to `app`."""
    app.command("export")(reported(export))


def export(
    path: DocArg,
    format: Annotated[Format, typer.Option(
        "--format", help="gguf: llama.cpp LoRA; ollama: GGUF + Modelfile; merged: transformers folder; "
        "peft: adapter folder for vLLM.")] = Format.gguf,
    out: Annotated[Optional[Path], typer.Option(
        "--out", help="Output folder (default: next to the document, <stem>-<version>-<format>).",
        show_default=False)] = None,
    adapter_version: Annotated[Optional[str], typer.Option(
        "--adapter-version", help="Adapter version to export, e.g. v0002 (default: current).",
        show_default=False)] = None,
    verify: Annotated[bool, typer.Option(
        "--verify", help="Check the export against peft (llama.cpp runtime when importable, "
        "else GGUF tensors).")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Replace --out even when dlm did not write it (never the document's folder, "
        "the store or the working folder).")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Export the document's adapter (GGUF, Ollama, merged transformers folder, or peft for vLLM)."""
    from dlm.actions.exporting import export as run_export
    from dlm.errors import ExportError

    report = run_export(path, format=format.value, out=out, adapter_version=adapter_version, verify=verify,
                        force=force)
    if json_out:
        print_json(report.as_dict())
    else:
        rows: list[tuple[str, object]] = [
            ("exported", f"{report.adapter_version} as {report.format} -> {report.out}"),
            ("files", ", ".join(report.files)),
            ("base", f"{report.base_model} (checked against: {report.base_checked_against})"),
            ("run with", report.command),
        ]
        if report.verify:
            numbers = ", ".join(f"{k} {v:.6g}" for k, v in sorted(report.verify["numbers"].items()))
            verdict = "passed" if report.verify["passed"] else "FAILED"
            rows.append(("verify", f"{report.verify['check']} {verdict}: {numbers} {report.verify['detail']}".strip()))
        print_table(rows)
    if report.verify and not report.verify["passed"]:
        raise ExportError(f"--verify: {report.verify['check']} failed; see the numbers above")

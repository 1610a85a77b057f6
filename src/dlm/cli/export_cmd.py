"""`dlm export`: write the adapter for llama.cpp, Ollama, vLLM or transformers.

Thin: `dlm.actions.exporting.export` does the work; this module parses flags and renders
the `ExportReport`. A failed `--verify` exits 1 after printing its numbers (the export
itself stays written).
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from dlm.cli.common import DocArg, JsonOpt, print_json, print_table
from dlm.cli.reporter import reported, warn_line

if TYPE_CHECKING:
    from dlm.actions.exporting import ExportReport


class Format(str, Enum):
    gguf = "gguf"
    ollama = "ollama"
    merged = "merged"
    peft = "peft"
    gguf_merged = "gguf-merged"


def register(app: typer.Typer) -> None:
    """Add the `export` command to `app`."""
    app.command("export")(reported(export))


def export(
    path: DocArg,
    format: Annotated[
        Format,
        typer.Option(
            "--format",
            help="gguf: llama.cpp LoRA; ollama: base GGUF + adapter GGUF + Modelfile; merged: "
            "transformers folder; peft: adapter folder for vLLM; gguf-merged: one GGUF of the merged model + "
            "a Modelfile without ADAPTER.",
        ),
    ] = Format.gguf,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Output folder (default: next to the document, <stem>-<version>-<format>).",
            show_default=False,
        ),
    ] = None,
    adapter_version: Annotated[
        str | None,
        typer.Option(
            "--adapter-version", help="Adapter version to export, e.g. v0002 (default: current).", show_default=False
        ),
    ] = None,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify", help="Check the export against peft (llama.cpp runtime when importable, else GGUF tensors)."
        ),
    ] = False,
    dtype: Annotated[
        str | None,
        typer.Option(
            "--dtype",
            help="Weights of merged (float32, float16, bfloat16; default float32) or gguf-merged "
            "(float16, q8_0, bfloat16, float32; default float16).",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace --out even when dlm did not write it (never the document's folder, "
            "the store or the working folder).",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Export the document's adapter (GGUF, Ollama, merged transformers folder or GGUF, or peft for vLLM)."""
    from dlm.actions.exporting import export as run_export

    report = run_export(
        path, format=format.value, out=out, adapter_version=adapter_version, verify=verify, force=force, dtype=dtype
    )
    if json_out:
        print_json(report.as_dict())
        _verify_outcome(report)
        return
    for warning in report.warnings:
        warn_line(warning)
    system = report.system_prompt
    said = repr(system["text"]) if system.get("text") else "the chat template's default system turn"
    rows: list[tuple[str, object]] = [
        ("exported", f"{report.adapter_version} as {report.format} -> {report.out}"),
        ("files", ", ".join(report.files)),
        ("adapter", f"{report.adapter_sha256} (checked against: {report.adapter_checked_against})"),
        ("base", f"{report.base_model} (checked against: {report.base_checked_against})"),
        ("system prompt", f"{said}, in: {'; '.join(system.get('carried_in', []))}"),
    ]
    if report.dtype:
        rows.append(("dtype", report.dtype))
    rows.append(("run with", report.command))
    if report.verify:
        numbers = ", ".join(f"{k} {v:.6g}" for k, v in sorted(report.verify["numbers"].items()))
        verdict = "passed" if report.verify["passed"] else "FAILED"
        rows.append(("verify", f"{report.verify['check']} {verdict}: {numbers} {report.verify['detail']}".strip()))
    print_table(rows)
    _verify_outcome(report)


def _verify_outcome(report: ExportReport) -> None:
    from dlm.errors import ExportError

    verify = report.verify
    if verify and not verify["passed"]:
        raise ExportError(f"--verify: {verify['check']} failed; see the numbers above")

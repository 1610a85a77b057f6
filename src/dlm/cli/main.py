"""`dlm` command line. Each command: parse, call one library function, render."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dlm import __version__
from dlm.cli.common import DocArg, JsonOpt, print_full_table, print_json, print_table
from dlm.cli.reporter import console, reported, set_verbose, warn_line
from dlm.cli.train_cmd import train
from dlm.defaults import DEFAULT_BASE_MODEL

app = typer.Typer(
    name="dlm",
    help="Train a LoRA adapter on a small LLM from a .dlm document, and serve it.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        print(f"dlm {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")] = False,
    version: Annotated[
        bool | None, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = None,
) -> None:
    set_verbose(verbose)
    _quiet_libraries()


def _quiet_libraries() -> None:
    """Library progress bars and advisories would interleave with dlm's own output.

    Set through the libraries' own environment switches, read when (and only if) a
    command imports them: importing transformers or datasets here would cost every
    command seconds, including those that never tokenize.
    """
    import os
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|peft|trl)\.")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("DATASETS_VERBOSITY", "error")  # the lazy training view has no hashable transform, by design
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


@app.command()
@reported
def init(
    path: Annotated[Path, typer.Argument(help="Where to write the new .dlm document.")],
    base: Annotated[
        str, typer.Option("--base", help="Base model: alias, local folder or hub id.")
    ] = DEFAULT_BASE_MODEL,
    source: Annotated[
        list[Path] | None, typer.Option("--source", help="A source folder to ingest (repeatable).")
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
) -> None:
    """Scaffold a valid .dlm document with a fresh dlm_id and an example instruction section."""
    from dlm.actions.scaffold import init as init_document

    written = init_document(path, base_model=base, sources=source or [], force=force)
    console.print(f"wrote {written}; next: [bold]dlm train {written}[/]")


app.command()(train)


@app.command()
@reported
def prompt(
    path: DocArg,
    question: Annotated[str | None, typer.Argument(help="The user message (or --file).", show_default=False)] = None,
    file: Annotated[
        Path | None,
        typer.Option(
            "--file",
            metavar="QUESTIONS.txt",
            help="Answer every line of this file (one question a line) with one model load.",
        ),
    ] = None,
    max_new_tokens: Annotated[int, typer.Option("--max-new-tokens", min=1)] = 128,
    temperature: Annotated[float, typer.Option("--temperature", min=0.0, help="0 is greedy.")] = 0.0,
    no_adapter: Annotated[bool, typer.Option("--no-adapter", help="Use the base model alone, to compare.")] = False,
    compare: Annotated[
        bool, typer.Option("--compare", help="Answer with the base model alone, then with the adapter: one model load.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Answer a question with the base model plus the current adapter, streamed; or each line of --file, in order."""
    from dlm.errors import UsageError

    if (question is None) == (file is None):
        raise UsageError("give a QUESTION or --file QUESTIONS.txt, not both or neither")
    if compare:
        if no_adapter:
            raise UsageError("--compare already answers with the base model alone; drop --no-adapter")
        _compare(path, question, file, max_new_tokens, temperature, json_out)
        return
    if file is not None:
        from rich.markup import escape

        from dlm.actions.prompting import prompt_many, read_questions

        def show(q: str, a: str) -> None:
            console.print(f"[bold]Q:[/] {escape(q)}", highlight=False)
            console.print(f"A: {a}\n", highlight=False, markup=False)

        answers = prompt_many(
            path,
            read_questions(file),
            max_new_tokens=max_new_tokens,
            temperature=temperature,
            use_adapter=not no_adapter,
            on_answer=None if json_out else show,
        )
        if json_out:
            print_json(answers)
        return
    from dlm.actions.prompting import prompt as prompt_action

    pieces = prompt_action(
        path, question or "", max_new_tokens=max_new_tokens, temperature=temperature, use_adapter=not no_adapter
    )
    if json_out:
        print_json({"question": question, "answer": "".join(pieces)})
        return
    for piece in pieces:
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")


def _compare(
    path: Path, question: str | None, file: Path | None, max_new_tokens: int, temperature: float, json_out: bool
) -> None:
    """`dlm prompt --compare`: each answer from the base model alone, then with the adapter."""
    from rich.markup import escape

    from dlm.actions.prompting import compare, read_questions

    questions = read_questions(file) if file is not None else [question or ""]

    def show(q: str, base: str, adapter: str) -> None:
        console.print(f"[bold]Q:[/] {escape(q)}", highlight=False)
        console.print("[dim]--- base model alone:[/]")
        console.print(base, highlight=False, markup=False)
        console.print("[dim]--- base model + the adapter:[/]")
        console.print(f"{adapter}\n", highlight=False, markup=False)

    answers = compare(
        path, questions, max_new_tokens=max_new_tokens, temperature=temperature, on_answer=None if json_out else show
    )
    if json_out:
        print_json(answers if file is not None else answers[0])


@app.command()
@reported
def show(
    path: DocArg,
    tokens: Annotated[
        str | None,
        typer.Option(
            "--tokens",
            metavar="PATH_OR_SECTION",
            help="Show one row's tokens as the model sees them: a source file path, a section's line, or relpath:line of a training.synth pair.",
        ),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="With --tokens: how many tokens to show.")] = 200,
    json_out: JsonOpt = False,
) -> None:
    """Show a document's id, base model, store, rows, adapter versions and last run."""
    from dlm.actions.views import show as show_action

    if tokens is not None:
        from dlm.actions.row_tokens import row_tokens
        from dlm.cli.judge_render import print_row_tokens

        row = row_tokens(path, tokens, limit)
        return print_json(row) if json_out else print_row_tokens(row)
    view = show_action(path)
    if json_out:
        print_json(view)
        return
    rows = view["rows"]
    last = view["last_run"]
    cache = view["training_cache"]
    print_table(
        [
            ("dlm_id", view["dlm_id"]),
            ("base model", view["base_model"]),
            ("store", view["store_path"]),
            (
                "rows",
                f"{rows['prose']} prose, {rows['instruction']} instruction, {rows['source_files']} source files"
                + (
                    f", {rows['synth_pairs']} synth Q/A ({rows['synth_probes']} probes held out)"
                    if rows["synth_pairs"] or rows["synth_probes"]
                    else ""
                )
                + (
                    f", teacher {rows['teacher_pairs']} Q/A" if rows["teacher_pairs"] or rows["teacher_unasked"] else ""
                ),
            ),
            *(
                [("synth by source", synth_by_source_line(rows["synth_by_source"]))]
                if rows.get("synth_by_source")
                else []
            ),
            (
                "adapter",
                f"{view['adapter']['current'] or 'none'} (versions: {', '.join(view['adapter']['versions']) or 'none'})",
            ),
            (
                "last run",
                "none"
                if not last
                else f"{last['run_id']} {last['status']}, {last['steps']} steps, loss {last['train_loss']}",
            ),
            ("cache", "none" if not cache else f"{cache['entry_count']} entries, {cache['bytes']:,} bytes"),
        ]
    )
    for note in view["notes"]:
        warn_line(note)


def synth_by_source_line(counts: dict[str, dict[str, int]]) -> str:
    """`go 12 Q/A + 3 probes, markdown 8 Q/A, ...` from `show`'s `synth_by_source`."""
    return ", ".join(
        f"{kind} {c['pairs']} Q/A" + (f" + {c['probes']} probes" if c["probes"] else "") for kind, c in counts.items()
    )


@app.command()
@reported
def metrics(
    path: DocArg,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            metavar="FILE.png",
            help="Write train (overall and per row kind) and held-out loss curves to a PNG.",
        ),
    ] = None,
    run: Annotated[str | None, typer.Option("--run", metavar="ID", help="Only this run (its run id).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Show training runs with their per-step loss (from the store's metrics.sqlite)."""
    from dlm.actions.views import metrics as metrics_action

    if plot is not None:
        from dlm.actions.views import plot_metrics

        console.print(f"wrote {plot_metrics(path, plot, run)}")
        return
    view = metrics_action(path, run)
    if json_out:
        print_json(view)
        return
    from dlm.cli.progress import format_kind_losses

    table = Table(
        "run",
        "status",
        "steps",
        "loss",
        "last step by kind",
        "held-out",
        "tokens/s",
        "adapter",
        "tokenize s",
        "cache hits",
    )
    for r in view["runs"]:
        tok = r["tokenization"] or {}
        evals = {e["phase"]: e["loss"] for e in r.get("evals", [])}
        last = max((k["step"] for k in r.get("kind_losses", [])), default=None)
        kinds = {k["kind"]: k["loss"] for k in r.get("kind_losses", []) if k["step"] == last}
        table.add_row(
            r["run_id"],
            r["status"],
            str(r["steps"]),
            f"{r['train_loss']:.4f}" if r["train_loss"] is not None else "-",
            format_kind_losses(kinds) or "-",
            f"{evals['before']:.3f} -> {evals['after']:.3f}" if {"before", "after"} <= evals.keys() else "-",
            f"{r['tokens_per_second']:,.0f}" if r["tokens_per_second"] else "-",
            r["adapter_version"] or "-",
            f"{tok.get('total_tokenize_seconds', 0):.2f}",
            f"{tok.get('cache_hits', 0)}/{tok.get('total_sections', 0)}",
        )
    if view["runs"]:
        print_full_table(table)
    else:
        console.print("no runs yet")
    for r in view["runs"]:
        if r.get("checkpoint"):
            console.print(
                f"run {r['run_id']} {r['status']}: checkpoint {r['checkpoint']}; `dlm train --resume` continues it"
            )


from dlm.cli import doctor_cmd, eval_cmd, export_cmd, serve_cmd, synth_cmd  # noqa: E402
from dlm.cli.cache_cmd import cache_app  # noqa: E402

app.add_typer(cache_app, name="cache")
doctor_cmd.register(app)
eval_cmd.register(app)
serve_cmd.register(app)
export_cmd.register(app)
synth_cmd.register(app)


def main() -> None:
    """Entry point of the `dlm` script."""
    app()

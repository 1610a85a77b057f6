"""`dlm` command line. Each command: parse, call one library function, render."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dlm import __version__
from dlm.cli.common import DocArg, JsonOpt, print_json, print_table
from dlm.cli.reporter import console, reported, set_verbose
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


@app.command()
@reported
def train(
    path: DocArg,
    max_steps: Annotated[int | None, typer.Option("--max-steps", min=1, help="Override training.max_steps.")] = None,
    no_cache: Annotated[
        bool, typer.Option("--no-cache", help="Bypass the tokenized-section cache without touching it.")
    ] = False,
    cache_remote: Annotated[
        str | None,
        typer.Option(
            "--cache-remote",
            help="Remote tier of the cache: a folder or fsspec URL (s3://bucket/prefix); default $DLM_CACHE_REMOTE, else training.cache.remote.",
            show_default=False,
        ),
    ] = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Refuse source symlinks that leave their root instead of skipping them.")
    ] = False,
    strict_lock: Annotated[bool, typer.Option("--strict-lock", help="Treat every lock warning as an error.")] = False,
    update_lock: Annotated[
        bool, typer.Option("--update-lock", help="Skip lock validation and write a new lock.")
    ] = False,
    ignore_lock: Annotated[
        bool, typer.Option("--ignore-lock", help="Skip lock validation and leave the lock as it is.")
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Print the steps, tokens and a measured ETA (2 real steps timed here), then stop; writes nothing to the store.",
        ),
    ] = False,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Continue the last interrupted run from its latest checkpoint (training.checkpoint_every); "
            "refused if the document, its rows or the hyperparameters changed.",
        ),
    ] = False,
    no_judge: Annotated[
        bool,
        typer.Option(
            "--no-judge",
            help="Skip the probe report that ends the run (training.eval.judge off for this run); `dlm eval` scores it later.",
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch", help="After the run, re-train whenever the document or its sources change (Ctrl-C stops)."
        ),
    ] = False,
    nproc: Annotated[
        int | None,
        typer.Option(
            "--nproc",
            min=1,
            help="Ranks (processes) on this machine, one per GPU on CUDA; default training.nproc, else 1.",
            rich_help_panel="Several processes",
        ),
    ] = None,
    nnodes: Annotated[
        int,
        typer.Option(
            "--nnodes",
            min=1,
            help="Machines in the run; start dlm train on each with its --node-rank.",
            rich_help_panel="Several processes",
        ),
    ] = 1,
    node_rank: Annotated[
        int,
        typer.Option(
            "--node-rank", min=0, help="This machine's index, 0..nnodes-1.", rich_help_panel="Several processes"
        ),
    ] = 0,
    master_addr: Annotated[
        str | None,
        typer.Option(
            "--master-addr", help="Address of node 0 (several machines).", rich_help_panel="Several processes"
        ),
    ] = None,
    master_port: Annotated[
        int | None,
        typer.Option(
            "--master-port",
            min=1,
            max=65535,
            help="Port of node 0's rendezvous (default 29500).",
            rich_help_panel="Several processes",
        ),
    ] = None,
    accelerate_config: Annotated[
        Path | None,
        typer.Option(
            "--accelerate-config",
            metavar="FILE",
            help="Start the ranks with accelerate launch and this config file (FSDP, DeepSpeed).",
            rich_help_panel="Several processes",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Train a new adapter version from the document (rows, tokenize, LoRA, save)."""
    from dlm.actions.training import LaunchSpec
    from dlm.actions.training import train as train_action
    from dlm.cli.common import lock_mode_from_flags, skips_text
    from dlm.cli.judge_render import print_heldout
    from dlm.cli.progress import format_kind_losses, make_train_sink

    mode = lock_mode_from_flags(strict=strict_lock, update=update_lock, ignore=ignore_lock)
    if dry_run:
        from dlm.actions.training import TrainOptions
        from dlm.actions.training.dryrun import dry_run as dry_run_action
        from dlm.cli.progress import dry_run_lines

        sink = make_train_sink(json_out)
        try:
            plan = dry_run_action(path, TrainOptions(max_steps=max_steps, strict_sources=strict, lock_mode=mode), sink)
        finally:
            sink.close()
        if json_out:
            return print_json(plan)
        for line in dry_run_lines(plan):
            console.print(line)
        return
    if watch:
        from dlm.cli.watch_cmd import run_watch
        from dlm.errors import UsageError

        if resume:
            raise UsageError("--watch starts fresh runs; resume the interrupted one first with --resume alone")
        if nproc is not None or nnodes > 1 or accelerate_config is not None:
            raise UsageError(
                "--watch trains in this process; drop --nproc/--nnodes/--accelerate-config, "
                "or run the multi-process train without --watch"
            )

        return run_watch(
            path,
            max_steps=max_steps,
            use_cache=not no_cache,
            strict_sources=strict,
            lock_mode=mode,
            judge=not no_judge,
            json_out=json_out,
        )
    launch = None
    if nproc is not None or nnodes > 1 or accelerate_config is not None or master_addr or master_port:
        launch = LaunchSpec(nproc or 1, nnodes, node_rank, master_addr, master_port, accelerate_config)
    sink = make_train_sink(json_out)
    try:
        report = train_action(
            path,
            max_steps=max_steps,
            use_cache=not no_cache,
            strict_sources=strict,
            lock_mode=mode,
            sink=sink,
            cache_remote=cache_remote,
            launch=launch,
            resume=resume,
            judge=not no_judge,
        )
    finally:
        sink.close()
    if report.rank != 0:
        return  # rank 0 reports for the run
    if json_out:
        print_json(report)
        return
    tok = report.tokenization
    console.print(
        f"rows: {report.rows['prose']} prose, {report.rows['instruction']} instruction, "
        f"{report.rows['source']} source files (skipped: {skips_text(report.files_skipped)})"
    )
    if report.lossy_files:
        console.print(
            f"{report.lossy_files} source files had bytes that are not UTF-8: kept, with U+FFFD in their place"
        )
    console.print(
        f"tokenize: {tok['total_sections']} rows in {tok['total_tokenize_seconds']:.2f}s "
        f"(cache hits {tok['cache_hits']}, misses {tok['cache_misses']})"
    )
    if report.distributed:
        d = report.distributed
        console.print(
            f"{d['world_size']} ranks ({d['backend']}): "
            + ", ".join(f"rank {r['rank']} hits {r['cache_hits']} misses {r['cache_misses']}" for r in d["ranks"])
        )
    tps = f"{report.tokens_per_second:,.0f}" if report.tokens_per_second else "n/a"
    loss = f"{report.train_loss:.4f}" if report.train_loss is not None else "n/a"
    kinds = f" ({format_kind_losses(report.kind_losses)})" if report.kind_losses else ""
    resumed = f" (resumed from {report.resumed_from})" if report.resumed_from else ""
    console.print(
        f"trained {report.steps} steps{resumed} on {report.train_tokens:,} tokens in "
        f"{report.train_seconds:.1f}s: [bold]{tps} tokens/s[/], loss {loss}{kinds}"
    )
    measuring = report.train_seconds - report.step_seconds
    if measuring >= 0.05:
        console.print(
            f"  of which {measuring:.1f}s went to measurements and checkpoints between steps (not in tokens/s)"
        )
    print_heldout(report)
    if report.evaluation:
        from dlm.cli.eval_cmd import report_lines

        for line in report_lines(report.evaluation):
            console.print(line)
    console.print(f"adapter {report.adapter_version} -> {report.adapter_dir}")


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
    json_out: JsonOpt = False,
) -> None:
    """Answer a question with the base model plus the current adapter, streamed; or each line of --file, in order."""
    from dlm.errors import UsageError

    if (question is None) == (file is None):
        raise UsageError("give a QUESTION or --file QUESTIONS.txt, not both or neither")
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
                ),
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
    console.print(table if view["runs"] else "no runs yet")
    for r in view["runs"]:
        if r.get("checkpoint"):
            console.print(
                f"run {r['run_id']} {r['status']}: checkpoint {r['checkpoint']}; `dlm train --resume` continues it"
            )


from dlm.cli import doctor_cmd, eval_cmd, export_cmd, serve_cmd  # noqa: E402
from dlm.cli.cache_cmd import cache_app  # noqa: E402

app.add_typer(cache_app, name="cache")
doctor_cmd.register(app)
eval_cmd.register(app)
serve_cmd.register(app)
export_cmd.register(app)


def main() -> None:
    """Entry point of the `dlm` script."""
    app()

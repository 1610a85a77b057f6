"""`dlm train`: parse the flags, call `dlm.actions.training.train` (or its dry run or
watch loop), render the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from dlm.cli.common import DocArg, JsonOpt, print_json
from dlm.cli.reporter import console, reported


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
            help=(
                "Print the steps, tokens and a measured ETA (4 real steps timed here, and the probe report after "
                "them), then stop; writes nothing to the store."
            ),
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
    from dlm.cli.common import lock_mode_from_flags
    from dlm.cli.progress import make_train_sink

    mode = lock_mode_from_flags(strict=strict_lock, update=update_lock, ignore=ignore_lock)
    if dry_run:
        return _dry_run(path, max_steps, strict, mode, json_out)
    if watch:
        return _watch(
            path,
            max_steps,
            not no_cache,
            strict,
            mode,
            not no_judge,
            json_out,
            resume=resume,
            several=nproc is not None or nnodes > 1 or accelerate_config is not None,
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
    render_report(report)


def _dry_run(path: Path, max_steps: int | None, strict: bool, mode: Any, json_out: bool) -> None:
    """`dlm train --dry-run`: the plan and a measured ETA, nothing written."""
    from dlm.actions.training import TrainOptions
    from dlm.actions.training.dryrun import dry_run as dry_run_action
    from dlm.cli.progress import dry_run_lines, make_train_sink

    sink = make_train_sink(json_out)
    try:
        plan = dry_run_action(path, TrainOptions(max_steps=max_steps, strict_sources=strict, lock_mode=mode), sink)
    finally:
        sink.close()
    if json_out:
        return print_json(plan)
    for line in dry_run_lines(plan):
        console.print(line)


def _watch(
    path: Path,
    max_steps: int | None,
    use_cache: bool,
    strict: bool,
    mode: Any,
    judge: bool,
    json_out: bool,
    *,
    resume: bool,
    several: bool,
) -> None:
    """`dlm train --watch`: re-train in this process on every change.

    Raises:
        UsageError: with `--resume` or a multi-process flag.
    """
    from dlm.cli.watch_cmd import run_watch
    from dlm.errors import UsageError

    if resume:
        raise UsageError("--watch starts fresh runs; resume the interrupted one first with --resume alone")
    if several:
        raise UsageError(
            "--watch trains in this process; drop --nproc/--nnodes/--accelerate-config, "
            "or run the multi-process train without --watch"
        )
    run_watch(
        path,
        max_steps=max_steps,
        use_cache=use_cache,
        strict_sources=strict,
        lock_mode=mode,
        judge=judge,
        json_out=json_out,
    )


def render_report(report: Any) -> None:
    """A finished run's `TrainReport`, as lines on the console."""
    from dlm.cli.common import skips_text
    from dlm.cli.judge_render import print_guard, print_heldout
    from dlm.cli.progress import format_kind_losses

    tok = report.tokenization
    console.print(
        f"rows: {report.rows['prose']} prose, {report.rows['instruction']} instruction, "
        f"{report.rows['source']} source files, {report.rows.get('synth', 0)} synth, {report.rows.get('replay', 0)} replay "
        f"(skipped: {skips_text(report.files_skipped)})"
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
        f"{report.train_seconds:.1f}s{f' ({report.precision})' if report.precision else ''}: "
        f"[bold]{tps} tokens/s[/], loss {loss}{kinds}"
    )
    measuring = report.train_seconds - report.step_seconds
    if measuring >= 0.05:
        console.print(
            f"  of which {measuring:.1f}s went to measurements and checkpoints between steps (not in tokens/s)"
        )
    if report.peak_rss_bytes:
        console.print(f"peak memory: {report.peak_rss_bytes / 1e9:.2f} GB resident (this process)")
    print_heldout(report)
    print_guard(report)
    if report.evaluation:
        from dlm.cli.eval_cmd import report_lines

        for line in report_lines(report.evaluation):
            console.print(line)
    console.print(f"adapter {report.adapter_version} -> {report.adapter_dir}")

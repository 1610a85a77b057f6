"""`dlm train` on several processes: the launching side and the work each rank adds.

Launching (`launch_train`): the document is parsed once, here, so a bad document is one
error before any rank starts; then `dlm.train.launch` starts the ranks, each running
`python -m dlm train DOC <the same options>`, and waits. The first rank on this machine
(rank 0 on node 0) writes its `TrainReport` as JSON to `$DLM_RANK_REPORT` (a file in
the run's log folder), which becomes this call's return value. The log folder, `$DLM_HOME/logs/ranks-*/` (each rank's stdout and stderr),
is removed after a successful run and kept, and named in the error, after a failed or
interrupted one.

Inside a rank (`dlm.actions.training.train_document` calls these):
- `run_id_for`: every rank takes rank 0's run id (rank N names its cache run `<id>-rN`);
- `check_agreement`: the ranks compare what they are about to train on (document,
  tokenizer, corpus, example count) and all stop at once when one differs;
- `write_report`: rank 0's report for the launcher.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dlm.errors import TrainingError
from dlm.train.distributed import REPORT_ENV, RankGroup, RankInfo
from dlm.train.launch import LaunchSpec, launch

if TYPE_CHECKING:
    from dlm.actions.training import TrainOptions, TrainReport


def child_args(path: Path, options: TrainOptions) -> list[str]:
    """The `dlm train` arguments each rank runs with (the launcher's own are left out)."""
    from dlm.lock import LockMode

    args = ["train", str(Path(path).resolve())]
    if options.max_steps is not None:
        args += ["--max-steps", str(options.max_steps)]
    if not options.use_cache:
        args.append("--no-cache")
    if options.strict_sources:
        args.append("--strict")
    if options.cache_remote:
        args += ["--cache-remote", options.cache_remote]
    flags = {LockMode.STRICT: "--strict-lock", LockMode.UPDATE: "--update-lock", LockMode.IGNORE: "--ignore-lock"}
    if options.lock_mode in flags:
        args.append(flags[options.lock_mode])
    return args


def launch_train(path: Path, options: TrainOptions, spec: LaunchSpec) -> TrainReport:
    """Train on `spec.nproc` ranks on this machine (× `spec.nnodes` machines).

    Returns:
        Rank 0's `TrainReport`; on a machine other than node 0, the report of this
        machine's first rank (`rank` > 0, no adapter: node 0 holds it).

    Raises:
        RankFailed: a rank failed (`rank N: cause (rank logs: DIR)`).
        KeyboardInterrupt: Ctrl-C; every rank was stopped, the store left as it was.
    """
    from dlm.actions.training import TrainReport

    from dlm.paths import dlm_home

    spec.check()
    logs = dlm_home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="ranks-", dir=logs))
    report_path = log_dir / "report.json"
    launch(spec, ["dlm", *child_args(path, options)], log_dir, {REPORT_ENV: str(report_path)})
    if not report_path.is_file():
        raise TrainingError(f"the ranks finished without a report ({report_path}); see the rank logs in {log_dir}")
    data = json.loads(report_path.read_text(encoding="utf-8"))
    shutil.rmtree(log_dir, ignore_errors=True)
    return TrainReport(**data)


def run_id_for(group: RankGroup, own: str) -> str:
    """Rank 0's run id, on every rank."""
    return group.from_main(own)


def cache_run_id(info: RankInfo, run_id: str) -> str:
    """The name this rank's tokenize session records in the cache (rank 0: the run id)."""
    return run_id if info.is_main else f"{run_id}-r{info.rank}"


def check_agreement(group: RankGroup, what: dict[str, Any]) -> None:
    """Stop every rank when any rank is about to train on something else than rank 0.

    Raises:
        TrainingError: on every rank, naming the first rank and field that differ (a
            node with another copy of the document or its sources).
    """
    seen = group.gather(what)
    for rank, theirs in enumerate(seen):
        for key, value in theirs.items():
            if value != seen[0].get(key):
                # every rank saw the same gather, so every rank is here: leave together
                group.barrier()
                group.close()
                raise TrainingError(
                    f"rank {rank}: {key} {value} differs from rank 0's {seen[0].get(key)}; "
                    "every node must train the same document on the same sources and base model"
                )


def rank_entry(info: RankInfo, stats: Any, waited: float, ready: float) -> dict[str, Any]:
    """One rank's tokenization as the report lists it: cache hits and misses, seconds in
    the tokenizer, seconds waiting at the barriers for earlier turns, and seconds from
    its turn to rows ready (walk + tokenize: "data-ready after the barrier")."""
    return {"rank": info.rank, "cache_hits": stats.cache_hits, "cache_misses": stats.cache_misses,
            "tokenize_seconds": round(stats.seconds, 3), "waited_seconds": round(waited, 3),
            "ready_seconds": round(ready, 3)}


def write_report(report: TrainReport, path: str) -> None:
    """Rank 0's report, for the launcher (`launch_train`)."""
    from dlm.atomic import atomic_write_json

    atomic_write_json(Path(path), asdict(report))

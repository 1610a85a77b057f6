"""`dlm train` on several processes: the launching side and the work each rank adds.

Launching (`launch_train`): the document was parsed once, by the caller, so a bad
document is one error before any rank starts. The launcher writes the run file,
`<log folder>/run.json` (`{"document": absolute path, "options": TrainOptions.to_json()}`),
and `dlm.train.launch` starts every rank as `python -m dlm.actions.training.rank
RUN_FILE`: the options travel as that file, never as command-line flags. The first rank
on this machine (rank 0 on node 0) writes its `TrainReport` as JSON to
`$DLM_RANK_REPORT` (`report.json` beside the run file), which becomes this call's
return value. The log folder, `$DLM_HOME/logs/ranks-*/` (each rank's stdout and
stderr), is removed after a successful run and kept, and named in the error, after a
failed or interrupted one.

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
from typing import Any

from dlm.actions.training.types import TrainOptions, TrainReport
from dlm.atomic import atomic_write_json
from dlm.errors import TrainingError
from dlm.train.distributed import REPORT_ENV, RankGroup, RankInfo
from dlm.train.launch import LaunchSpec, launch

RANK_MODULE = "dlm.actions.training.rank"


def write_run_file(path: Path, document: Path, options: TrainOptions) -> None:
    """The run file each rank starts on (module docstring)."""
    atomic_write_json(path, {"document": str(Path(document).resolve()), "options": options.to_json()})


def read_run_file(path: Path) -> tuple[Path, TrainOptions]:
    """(document path, options) from a run file.

    Raises:
        TrainingError: the file is missing or not a run file (names it).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return Path(data["document"]), TrainOptions.from_json(data["options"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise TrainingError(f"{path}: not a dlm rank run file ({exc}); start ranks with dlm train --nproc N") from None


def launch_train(path: Path, options: TrainOptions, spec: LaunchSpec) -> TrainReport:
    """Train on `spec.nproc` ranks on this machine (× `spec.nnodes` machines).

    Returns:
        Rank 0's `TrainReport`; on a machine other than node 0, the report of this
        machine's first rank (`rank` > 0, no adapter: node 0 holds it).

    Raises:
        RankFailed: a rank failed (`rank N: cause (rank logs: DIR)`).
        KeyboardInterrupt: Ctrl-C; every rank was stopped, the store left as it was.
    """
    from dlm.paths import dlm_home

    spec.check()
    logs = dlm_home() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="ranks-", dir=logs))
    report_path, run_file = log_dir / "report.json", log_dir / "run.json"
    write_run_file(run_file, path, options)
    launch(spec, [RANK_MODULE, str(run_file)], log_dir, {REPORT_ENV: str(report_path)})
    if not report_path.is_file():
        raise TrainingError(f"the ranks finished without a report ({report_path}); see the rank logs in {log_dir}")
    data = json.loads(report_path.read_text(encoding="utf-8"))
    shutil.rmtree(log_dir, ignore_errors=True)
    return TrainReport(**data)


def run_id_for(group: RankGroup, own: str) -> str:
    """Rank 0's run id, on every rank."""
    return group.from_main(own)


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
    return {
        "rank": info.rank,
        "cache_hits": stats.cache_hits,
        "cache_misses": stats.cache_misses,
        "tokenize_seconds": round(stats.seconds, 3),
        "waited_seconds": round(waited, 3),
        "ready_seconds": round(ready, 3),
    }


def write_report(report: TrainReport, path: str) -> None:
    """Rank 0's report, for the launcher (`launch_train`)."""
    atomic_write_json(Path(path), asdict(report))

"""Start the ranks of a run through torch's elastic launcher or accelerate's.

`dlm train DOC --nproc N` does not fork ranks itself: it builds the argument list
`torchrun` would parse and calls `torch.distributed.run.run` in-process (or
`accelerate launch` when an accelerate config file is given), and each rank runs
`python -m dlm train DOC ...` with `RANK`/`WORLD_SIZE`/`LOCAL_RANK` set. The launcher
owns the processes: it starts them in their own sessions, stops all of them when one
fails (SIGTERM) or when it receives Ctrl-C (it forwards SIGINT), and kills what is left
after its grace period, so no rank outlives `dlm train`.

Each rank's stdout and stderr go to `<log_dir>/<run>/attempt_0/<local rank>/`
(torch's layout); a failing rank writes its one-line cause to the error file the
launcher gives it (`dlm.train.distributed.write_rank_error`), and `launch` raises it
as `rank N: cause`.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.errors import TrainingError, UsageError


class RankFailed(TrainingError):
    """A rank of a multi-process run failed; the message names the rank and the cause."""


@dataclass(frozen=True)
class LaunchSpec:
    """Where the ranks run.

    Attributes:
        nproc: ranks on this machine (one per GPU on CUDA).
        nnodes: machines in the run; each runs `dlm train` with its own `node_rank`.
        node_rank: this machine's index, 0..nnodes-1.
        master_addr, master_port: where node 0 listens for the rendezvous (several
            machines); None on one machine picks a free local port.
        accelerate_config: an accelerate config file (FSDP, DeepSpeed, ...): the ranks
            are started by `accelerate launch --config_file` instead of torchrun.
    """

    nproc: int
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None
    accelerate_config: Path | None = None

    def check(self) -> None:
        """Raises UsageError: counts below 1, a node rank out of range, or several
        machines without `--master-addr`."""
        if self.nproc < 1 or self.nnodes < 1:
            raise UsageError(f"--nproc {self.nproc} --nnodes {self.nnodes}: each must be at least 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise UsageError(f"--node-rank {self.node_rank} is outside 0..{self.nnodes - 1} (--nnodes {self.nnodes})")
        if self.nnodes > 1 and not self.master_addr:
            raise UsageError("--nnodes > 1 needs --master-addr (the address of node 0) and the same on every node")
        if self.accelerate_config is not None and not Path(self.accelerate_config).is_file():
            raise UsageError(f"--accelerate-config {self.accelerate_config}: no such file")


def torchrun_argv(spec: LaunchSpec, program: list[str], log_dir: Path) -> list[str]:
    """The `torchrun` arguments that start `python -m <program...>` on `spec.nproc` ranks.

    One machine without a master address uses `--standalone` (a free local port);
    otherwise the static rendezvous at `master_addr:master_port` (default port 29500).
    `--max-restarts 0`: a failed rank ends the run rather than restarting it.
    """
    argv = ["--nproc-per-node", str(spec.nproc), "--max-restarts", "0", "--log-dir", str(log_dir), "--redirects", "3"]
    if spec.nnodes == 1 and spec.master_addr is None and spec.master_port is None:
        argv.append("--standalone")
    else:
        argv += [
            "--nnodes",
            str(spec.nnodes),
            "--node-rank",
            str(spec.node_rank),
            "--master-addr",
            spec.master_addr or "127.0.0.1",
            "--master-port",
            str(spec.master_port or 29500),
        ]
    return [*argv, "-m", *program]


def accelerate_argv(spec: LaunchSpec, program: list[str]) -> list[str]:
    """The `accelerate launch` arguments for `spec` (its config file decides the rest)."""
    argv = [
        "--config_file",
        str(spec.accelerate_config),
        "--num_processes",
        str(spec.nproc * spec.nnodes),
        "--num_machines",
        str(spec.nnodes),
        "--machine_rank",
        str(spec.node_rank),
    ]
    if spec.master_addr:
        argv += ["--main_process_ip", spec.master_addr]
    if spec.master_port:
        argv += ["--main_process_port", str(spec.master_port)]
    return [*argv, "-m", *program]


def launch(spec: LaunchSpec, program: list[str], log_dir: Path, env: Mapping[str, str]) -> None:
    """Run `python -m <program>` on every rank of `spec` and wait for all of them.

    Args:
        program: module and arguments, e.g. `["dlm", "train", "doc.dlm"]`.
        log_dir: where the ranks' stdout/stderr and error files go.
        env: extra environment variables for every rank.

    Raises:
        RankFailed: a rank failed; `rank N: <its one-line cause> (rank logs: <log_dir>)`.
        KeyboardInterrupt: Ctrl-C (or SIGTERM) reached the launcher; every rank was
            stopped before this returns.
    """
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    spec.check()
    env = {"OMP_NUM_THREADS": rank_threads(spec.nproc, os.environ, os.cpu_count()), **env}
    with _quiet_launcher(), _env(env):
        try:
            if spec.accelerate_config is not None:
                from accelerate.commands.launch import launch_command, launch_command_parser

                launch_command(launch_command_parser().parse_args(accelerate_argv(spec, program)))
            else:
                from torch.distributed.run import get_args_parser, run

                run(get_args_parser().parse_args(torchrun_argv(spec, program, log_dir)))
        except ChildFailedError as exc:
            raise RankFailed(f"{describe_failure(exc)} (rank logs: {log_dir})") from None
        except SignalException:
            raise KeyboardInterrupt from None


def describe_failure(exc: Any) -> str:
    """`rank N: cause` for the first rank that failed in a torch `ChildFailedError`."""
    failures = exc.failures
    killed = sorted(r for r, f in failures.items() if f.exitcode < 0)
    # a rank killed by a signal (the OOM killer, kill -9) is the cause; the peers that
    # lost their connection to it fail after it, and those still running when the launcher
    # notices are stopped by its SIGTERM: a rank killed by another signal comes first
    killed = [r for r in killed if failures[r].exitcode != -signal.SIGTERM] or killed
    rank, failure = (killed[0], failures[killed[0]]) if killed else exc.get_first_failure()
    message = failure.message
    if isinstance(message, dict):  # the format torch's own `@record` writes
        message = message.get("message", "")
    if failure.exitcode < 0:
        return f"rank {rank}: killed by {failure.signal_name()}"
    if not message or not failure.error_file_data or message.startswith("To enable traceback"):
        return f"rank {rank}: exited with status {failure.exitcode} and no message"
    text = str(message).strip().splitlines()[0]
    return text if text.startswith(f"rank {rank}:") else f"rank {rank}: {text}"


@contextmanager
def _env(extra: Mapping[str, str]) -> Iterator[None]:
    """Set `extra` in `os.environ` for the ranks to inherit, then restore it."""
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextmanager
def _quiet_launcher() -> Iterator[None]:
    """The launcher's own log lines (rendezvous, worker states, stop signals, its thread
    advice) would bury `dlm`'s output; its failures come back as exceptions instead.
    torch gives each of its modules a logger with its own level, so each is set."""
    import torch.distributed.run  # noqa: F401  (creates the launcher's loggers)

    names = [n for n in logging.root.manager.loggerDict if n.startswith("torch.distributed")]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels, strict=False):
            lg.setLevel(level)


def rank_threads(nproc: int, env: Mapping[str, str], cpus: int | None) -> str:
    """`OMP_NUM_THREADS` for each rank: the user's value, else the machine's cores shared
    evenly (at least 1). torchrun's own default is 1, which leaves cores idle on CPU."""
    if env.get("OMP_NUM_THREADS"):
        return env["OMP_NUM_THREADS"]
    return str(max(1, (cpus or 1) // max(1, nproc)))

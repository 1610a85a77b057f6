"""Training on several processes: the plan, the rank's place in it, and the hand-offs.

`dlm` manages no processes of its own. Ranks are started by torch's elastic launcher
(`torchrun`, or `dlm train --nproc N`, which calls the same launcher; see
`dlm.actions.launch`) or by `accelerate launch`, and find their place in the usual
environment variables (`RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE`). The
process group is accelerate's (`PartialState`): the very state the training loop's
`Accelerator` then uses, so `dlm` never initializes a second one.

The plan (`DistPlan`) is a value: world size, per-device micro-batch, gradient
accumulation steps per rank, collective backend (`gloo` on CPU, `nccl` on CUDA, `none`
for one process). The trainer steps once per `micro_batch × grad_accum × world_size`
rows. Adapter bytes depend on the micro-batch shape (`batch_size` rows, padded to the
longest) and on how many micro-batches are averaged per step (`grad_accum × world_size`),
not on which process ran each one: DDP averages the ranks' gradients, which is the
same sum as accumulation (exact for a power-of-two world size, where the 1/N scale is
exact in binary floating point). So `--nproc 2` with `gradient_accumulation_steps: 1`
gives the bytes of one process with `gradient_accumulation_steps: 2`, provided nothing
random runs per rank (LoRA dropout 0: each rank draws its own dropout masks).

Tokenization hand-off (`in_turns`): rank 0 runs the tokenize step first, then, after a
barrier, the first process of every other node (with a node-local `DLM_HOME` this is
that node's one cold refresh; with a shared one it reads rank 0's entries), then,
after a second barrier, every other rank, which finds every row in the cache.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar

from dlm.errors import TrainingError

Backend = Literal["none", "gloo", "nccl"]
T = TypeVar("T")

# the process group waits this long at a barrier: a cold tokenization of a large corpus
# runs on rank 0 while the others wait (the elastic launcher stops them sooner when a
# rank dies)
BARRIER_TIMEOUT = timedelta(hours=6)
# rank 0 of a run started by `dlm train --nproc` writes its report (JSON) to this path
REPORT_ENV = "DLM_RANK_REPORT"
# torch's elastic launcher gives every rank a file to describe its failure in
ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"


@dataclass(frozen=True)
class RankInfo:
    """This process's place among the ranks (from the launcher's environment).

    Attributes:
        rank: global rank, 0..world_size-1.
        world_size: number of processes in the run.
        local_rank: rank on this machine, 0..local_world_size-1.
        local_world_size: processes on this machine.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> RankInfo:
        """Read `RANK`, `WORLD_SIZE`, `LOCAL_RANK`, `LOCAL_WORLD_SIZE` (absent: one process).

        Raises:
            TrainingError: a value is not an integer, or the ranks are inconsistent.
        """
        env = os.environ if env is None else env
        try:
            world = int(env.get("WORLD_SIZE", "1"))
            rank = int(env.get("RANK", "0"))
            local_rank = int(env.get("LOCAL_RANK", str(rank)))
            local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
        except ValueError as exc:
            raise TrainingError(f"launcher environment: {exc} (RANK/WORLD_SIZE/LOCAL_RANK must be integers)") from None
        if world < 1 or not 0 <= rank < world or not 0 <= local_rank < local_world:
            raise TrainingError(
                f"launcher environment: RANK={rank} WORLD_SIZE={world} LOCAL_RANK={local_rank} "
                f"LOCAL_WORLD_SIZE={local_world} are inconsistent; start ranks with torchrun or dlm train --nproc"
            )
        return cls(rank, world, local_rank, local_world)

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one writer of the store (adapter, manifest, metrics, lock)."""
        return self.rank == 0


@dataclass(frozen=True)
class DistPlan:
    """How a run spreads over processes (recorded in the lock; `dlm doctor --nproc` shows it).

    Attributes:
        world_size: processes (ranks) in the run.
        per_device_batch_size: rows per micro-batch on each rank (`training.batch_size`).
        gradient_accumulation_steps: micro-batches each rank sums per optimizer step.
        backend: collective backend, `none` for a single process.
        device: `cpu` or `cuda` (one GPU per rank).
    """

    world_size: int
    per_device_batch_size: int
    gradient_accumulation_steps: int
    backend: Backend
    device: str

    @property
    def rows_per_step(self) -> int:
        """Rows per optimizer step over all ranks."""
        return self.per_device_batch_size * self.gradient_accumulation_steps * self.world_size

    @property
    def micro_batches_per_step(self) -> int:
        """Micro-batches averaged per optimizer step: what the adapter bytes depend on."""
        return self.gradient_accumulation_steps * self.world_size

    def notes(self) -> list[str]:
        """What the user should know about this plan's determinism (may be empty)."""
        out = []
        if not is_power_of_two(self.world_size):
            out.append(
                f"world size {self.world_size} is not a power of two: averaging gradients over it "
                "rounds, so adapters are not byte-identical to a single-process run"
            )
        return out


def is_power_of_two(n: int) -> bool:
    """True for 1, 2, 4, 8, ..."""
    return n >= 1 and n & (n - 1) == 0


def pick_backend(world_size: int, device: str) -> Backend:
    """`nccl` between CUDA ranks, `gloo` between CPU ranks, `none` for one process.

    Accelerate makes the same choice; `dlm` names it so the lock can record it before
    the process group exists.
    """
    if world_size <= 1:
        return "none"
    return "nccl" if device == "cuda" else "gloo"


def make_plan(world_size: int, batch_size: int, grad_accum: int, device: str) -> DistPlan:
    """The plan for `world_size` ranks training with the document's batch settings.

    Raises:
        TrainingError: `world_size`, `batch_size` or `grad_accum` below 1.
    """
    if world_size < 1 or batch_size < 1 or grad_accum < 1:
        raise TrainingError(
            f"world size {world_size}, batch_size {batch_size}, gradient_accumulation_steps {grad_accum}: "
            "each must be at least 1"
        )
    return DistPlan(world_size, batch_size, grad_accum, pick_backend(world_size, device), device)


class RankGroup:
    """The process group of a run, as accelerate's `PartialState` holds it.

    One process (`world_size` 1) has no group: barriers return at once and gathers
    return a one-item list, so callers need no special case.
    """

    def __init__(self, info: RankInfo, device: str) -> None:
        self.info, self.device = info, device
        self._state: Any = None
        if info.distributed:
            from accelerate import PartialState

            self._state = PartialState(cpu=device != "cuda", timeout=BARRIER_TIMEOUT)

    def barrier(self) -> None:
        """Wait until every rank reaches this point."""
        if self._state is not None:
            self._state.wait_for_everyone()

    def gather(self, value: T) -> list[T]:
        """Every rank's `value` (picklable), indexed by rank."""
        if self._state is None:
            return [value]
        import torch.distributed as dist

        out: list[Any] = [None] * self.info.world_size
        dist.all_gather_object(out, value)
        return out

    def close(self) -> None:
        """Tear the process group down now, while the interpreter is whole. Left to exit,
        gloo's background threads can outlive the group's destructor when a peer leaves
        first, and the process aborts ("terminate called without an active exception")
        after its error line was printed."""
        if self._state is None:
            return
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        self._state = None

    def from_main(self, value: T) -> T:
        """Rank 0's `value` on every rank (picklable)."""
        if self._state is None:
            return value
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def in_turns(self, fn: Callable[[], T]) -> tuple[T, float, float]:
        """Run `fn` on rank 0 first, then on the first rank of each other node, then
        everywhere else (module docstring). Every rank calls this once.

        Returns:
            `fn()`'s value, the seconds this rank waited at barriers before running it,
            and the seconds `fn` took here (after its barrier: the time to data-ready).
        """
        mine = _turn_of(self.info)
        waited = took = 0.0
        for turn in range(3):
            if turn == mine:
                t0 = time.perf_counter()
                result = fn()
                took = time.perf_counter() - t0
            if turn < 2:
                t0 = time.perf_counter()
                self.barrier()
                if turn < mine:
                    waited += time.perf_counter() - t0
        return result, waited, took


def _turn_of(info: RankInfo) -> int:
    if info.is_main:
        return 0
    return 1 if info.local_rank == 0 else 2


def rank_error_message(info: RankInfo, message: str) -> str:
    """`rank N: message` when several ranks run, else `message` unchanged."""
    return f"rank {info.rank}: {message}" if info.distributed else message


def write_rank_error(message: str, env: Mapping[str, str] | None = None) -> None:
    """Tell the elastic launcher why this rank failed (`$TORCHELASTIC_ERROR_FILE`, when set).

    The launcher reads `{"message": ..., "timestamp": ...}` and reports the first
    failing rank's message; nothing is written outside a launched rank.
    """
    env = os.environ if env is None else env
    path = env.get(ERROR_FILE_ENV)
    if not path:
        return
    import json

    from dlm.atomic import atomic_write_text

    atomic_write_text(path, json.dumps({"message": message, "timestamp": int(time.time())}))


class StoppedByLauncher(BaseException):
    """The launcher stopped this rank (SIGTERM): another rank failed."""


@contextmanager
def launcher_signals(info: RankInfo) -> Iterator[None]:
    """Inside a rank: SIGTERM (the launcher stopping every rank) raises
    `StoppedByLauncher` once, so the run is recorded and staging removed; a second
    signal during that cleanup is ignored (the launcher kills after its grace period)."""
    if not info.distributed:
        yield
        return

    def _stop(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise StoppedByLauncher(f"stopped by the launcher (signal {signal.Signals(signum).name})")

    previous = signal.signal(signal.SIGTERM, _stop), signal.signal(signal.SIGINT, _stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])

"""The LoRA training loop: one function, `train`, read top to bottom.

    prepare the model (`dlm.train.model.prepare_model`), AdamW and a linear decay
    for each optimizer step:
        for each of this rank's micro-batches (`dlm.train.data.Schedule`):
            collate on the host (`dlm.train.shared_prefix.micro_batch`: windows that fit
                in `sequence_len` together as one row, their shared prefix once), move to the device
            forward under autocast: per-token NLL with the LM head fused (`FusedLossModel`);
                with `replay_loss: kl`, KL to the base model at replay positions (`dlm.train.replay_kl`)
            loss = NLL summed (replay positions times `replay_weight`) / loss tokens of the
                whole step (every rank's) * ranks
            backward (gradients synchronized across ranks on the last micro-batch only)
        clip the gradient norm to 1, step the optimizer and the schedule
        log the step; measure (held-out loss, probes) and checkpoint when due

accelerate places the model, wraps it for several ranks (DDP over gloo on CPU, NCCL on
CUDA) and skips the gradient all-reduce on micro-batches before a step's last; a
bfloat16 run autocasts the forward (`torch.autocast`; accelerate's mixed precision is
one setting for the whole process, and a process may train twice). The loss divisor is the step's loss tokens over all
its micro-batches on every rank, which every rank computes from the schedule alone, and
DDP averages the ranks' gradients, so `W` ranks with `A` accumulation steps train the
bytes of one process with `W * A` (the keyed dropout gives the same masks too).

The device is never waited on inside a step: batches are made on the host (with the
positions that carry loss, `loss_rows`, so the fused loss needs no `nonzero` on the
device), the loss and the per-kind sums stay device tensors, and a step's loss is read
after the next step has been queued (or when a measurement or checkpoint syncs anyway).

Hyperparameters follow Hugging Face's Trainer defaults, which `dlm`'s recipes were
tuned with: AdamW (betas 0.9/0.999, eps 1e-8, no weight decay), linear decay to 0 over
the run without warmup, gradient norm clipped to 1.0.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from dlm.doc.budget import Every
from dlm.train.checkpoint import CheckpointClock, read_state, save_checkpoint
from dlm.train.data import KINDS, Schedule, to_device
from dlm.train.lora import (
    Hyperparameters,
    LoraResult,
    StepSink,
    device_memory,
    gradient_checkpointing,
    run_activation_bytes,
)
from dlm.train.model import ModelPlan, prepare_model
from dlm.train.replay_kl import replay_inputs, weigh_replay
from dlm.train.shared_prefix import micro_batch

MAX_GRAD_NORM = 1.0


class Measurement(Protocol):
    """Something measured between optimizer steps (the held-out loss, the probes)."""

    def due(self, step: int, max_steps: int) -> bool:
        """Whether to measure after optimizer step `step` of `max_steps`."""
        ...

    def between_steps(self, model: Any, step: int) -> bool:
        """Measure `model` (the peft model, in training mode) after `step`; True asks the
        loop to stop (an early stop)."""
        ...

    def save(self, folder: Path) -> None:
        """Write what a resumed run needs into a checkpoint `folder`."""
        ...

    def load(self, folder: Path) -> None:
        """Read it back from a checkpoint `folder`."""
        ...


@dataclass(frozen=True)
class LoopRun:
    """A prepared run, as the loop sees it.

    Attributes:
        dataset: a `dlm.train.dataset` dataset (`__getitem__`, `lengths`, `loss_tokens`,
            `token_kinds`).
        row_kinds: 1-D int64 [n_rows], the `KINDS` index of each row (per-kind loss).
        pad_id: the id padding is written with.
        rank, world_size: this process among the ranks.
        checkpoints: the run's `checkpoints/` folder, None: no checkpoints.
        every: when a checkpoint is due.
        resume_from: a checkpoint folder to continue from.
        on_checkpoint: called with (step, folder) after each checkpoint is published.
    """

    hyper: Hyperparameters
    dataset: Any
    row_kinds: np.ndarray
    sequence_len: int
    pad_id: int
    rank: int = 0
    world_size: int = 1
    checkpoints: Path | None = None
    every: Every | None = None
    resume_from: Path | None = None
    on_checkpoint: Callable[[int, Path], None] | None = None


@dataclass
class LoopState:
    """What the loop has done, saved with each checkpoint (`state.json`).

    Attributes:
        step: optimizer steps done.
        tokens: real tokens this rank trained on; `processed`: with padding.
        loss_tokens: loss-carrying tokens this rank trained on.
        loss_sum: the steps' losses added up (nats per loss token, each step's mean).
        forwards: training forwards this rank made.
    """

    step: int = 0
    tokens: int = 0
    processed: int = 0
    loss_tokens: int = 0
    loss_sum: float = 0.0
    forwards: int = 0


@dataclass
class _Pending:
    """A step whose loss has not been read from the device yet."""

    step: int
    loss: torch.Tensor  # summed NLL of the step's micro-batches (being summed over ranks by `reduced`)
    reduced: Any  # the all-reduce's handle with several ranks, else None
    kind_sums: torch.Tensor  # float32 [len(KINDS) + 1]
    kind_counts: np.ndarray
    loss_tokens: int  # of the whole step, every rank
    learning_rate: float
    tokens: int
    seconds: float


@dataclass
class _Log:
    """Step logging: reads losses off the device one step late (module docstring). The
    per-kind losses are this rank's share."""

    sink: Any
    state: LoopState
    pending: list[_Pending] = field(default_factory=list)

    def flush(self, keep_last: bool = False) -> None:
        while len(self.pending) > (1 if keep_last else 0):
            p = self.pending.pop(0)
            if p.reduced is not None:
                p.reduced.wait()
            loss = float(p.loss) / max(p.loss_tokens, 1)
            self.state.loss_sum += loss
            sums = p.kind_sums.tolist()
            kinds = {
                k: (sums[i] / int(p.kind_counts[i]), int(p.kind_counts[i]))
                for i, k in enumerate(KINDS)
                if p.kind_counts[i]
            }
            if kinds and hasattr(self.sink, "on_kind_losses"):
                self.sink.on_kind_losses(p.step, kinds)
            rate = p.tokens / p.seconds if p.seconds > 0 else None
            self.sink.on_step(p.step, loss, rate, p.learning_rate, p.tokens, p.seconds)


def train(base: Any, run: LoopRun, sink: StepSink, measurements: Sequence[Measurement] = ()) -> LoraResult:
    """Train a fresh LoRA adapter on `base` (a frozen float32 causal LM) over `run`.

    Returns:
        A `LoraResult` whose `model` is the trained peft model (adapter not saved; in a
        bfloat16 run its frozen weights are held in bfloat16, `dlm.train.precision`).

    Raises:
        KeyboardInterrupt: untouched, so the caller keeps the last checkpoint.
        TrainingError: a checkpoint to resume from is unreadable.
    """
    state = LoopState(**read_state(run.resume_from)["loop"]) if run.resume_from is not None else LoopState()
    parts = _set_up(base, run, state, measurements)
    saver = CheckpointClock(run.every) if run.every is not None and run.checkpoints is not None else None
    log = _Log(sink, state)
    if parts.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    sink.on_train_start(parts.max_steps)
    started, measured, tokens_before, stop = time.perf_counter(), 0.0, state.tokens, False
    while state.step < parts.max_steps and not stop:
        pending = _step(parts, run, state)
        pending.seconds = time.perf_counter() - started - measured
        log.pending.append(pending)
        measure = [m for m in measurements if m.due(state.step, parts.max_steps)]
        due = saver is not None and saver.due(state.step, parts.max_steps)
        # a step's loss is read once the next one is queued, unless something syncs now anyway
        log.flush(keep_last=not (due or measure) and state.step < parts.max_steps)
        before = time.perf_counter()
        for measurement in measure:
            stop = measurement.between_steps(parts.peft_model, state.step) or stop
        if due and saver is not None and run.checkpoints is not None:
            path = _save(run.checkpoints, state, parts, measurements)
            saver.saved()
            if run.on_checkpoint is not None:
                run.on_checkpoint(state.step, path)
        measured += time.perf_counter() - before
    log.flush()
    return LoraResult(
        model=parts.peft_model,
        steps=state.step,
        train_loss=state.loss_sum / state.step if state.step else None,
        tokens_seen=state.tokens,
        seconds=time.perf_counter() - started,
        accelerator_peak_bytes=int(torch.cuda.max_memory_allocated()) if parts.device.type == "cuda" else None,
        hook_seconds=measured,
        tokens_before=tokens_before,
        processed_tokens=state.processed,
        loss_tokens=state.loss_tokens,
    )


@dataclass
class _Parts:
    """What `_set_up` builds: the prepared model and what steps it."""

    model: Any  # the `FusedLossModel`, wrapped for several ranks where there are
    peft_model: Any
    clock: Any  # the keyed dropout's `MicroBatchClock`
    optimizer: Any
    scheduler: Any
    params: list[torch.nn.Parameter]
    schedule: Schedule
    max_steps: int
    accelerator: Any
    device: torch.device
    autocast: Any


def run_schedule(run: LoopRun) -> Schedule:
    """The order `run` trains its examples in (`dlm.train.data.Schedule`), every rank's."""
    hyper, dataset = run.hyper, run.dataset
    return Schedule(
        dataset.lengths,
        dataset.loss_tokens,
        hyper.batch_size,
        hyper.gradient_accumulation_steps,
        run.world_size,
        hyper.seed,
        run.sequence_len,
        dataset.originals,
    )


def run_steps(run: LoopRun, schedule: Schedule) -> int:
    """The optimizer steps `run` takes: `max_steps`, else its epochs' steps."""
    return run.hyper.max_steps or schedule.steps_for(run.hyper.num_epochs)


def _set_up(base: Any, run: LoopRun, state: LoopState, measurements: Sequence[Measurement]) -> _Parts:
    """The model (`prepare_model`), the schedule, AdamW and the linear decay, restored
    from `run.resume_from` when set, and handed to accelerate."""
    from accelerate import Accelerator

    hyper = run.hyper
    on_cuda = torch.cuda.is_available()
    # mixed precision is the loop's own `torch.autocast`: accelerate's is one setting per
    # process, and a process may train twice (`--watch`, a notebook) in two precisions
    accelerator = Accelerator(cpu=not on_cuda)
    checkpointing = hyper.gradient_checkpointing
    if checkpointing is None:
        estimate = run_activation_bytes(base.config, hyper.batch_size, run.dataset.lengths, run.sequence_len)
        checkpointing = gradient_checkpointing(estimate, device_memory("cuda" if on_cuda else "cpu"))
    plan = ModelPlan(hyper, run.rank, run.world_size, forwards_done=state.forwards, checkpointing=checkpointing)
    model = prepare_model(base, plan)
    schedule = run_schedule(run)
    max_steps = run_steps(run, schedule)
    params = [p for p in model.peft_model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=hyper.learning_rate, weight_decay=0.0, fused=on_cuda or None)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: max(0.0, (max_steps - s) / max_steps))
    if run.resume_from is not None:
        _load(run.resume_from, model.peft_model, optimizer, scheduler, measurements)
    peft_model, clock = model.peft_model, model.clock
    wrapped, optimizer = accelerator.prepare(model, optimizer)
    device = accelerator.device
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=hyper.precision == "bfloat16")
    return _Parts(
        wrapped, peft_model, clock, optimizer, scheduler, params, schedule, max_steps, accelerator, device, autocast
    )


def _step(parts: _Parts, run: LoopRun, state: LoopState) -> _Pending:
    """One optimizer step: this rank's micro-batches forward and backward, then the
    clipped update (module docstring). Returns the step's loss, still on the device."""
    plan = parts.schedule.step(state.step, run.rank)
    device, model = parts.device, parts.model
    step_loss = torch.zeros((), device=device)
    kind_sums = torch.zeros(len(KINDS) + 1, device=device)
    kind_counts = np.zeros(len(KINDS) + 1, dtype=np.int64)
    tokens = 0
    for i, (index, examples) in enumerate(plan.micro_batches):
        batch = micro_batch(
            [run.dataset[int(j)] for j in examples],
            run.pad_id,
            run.sequence_len,
            [run.dataset.token_kinds(int(j), run.row_kinds) for j in examples],
        )
        inputs = replay_inputs(batch) if run.hyper.replay_loss == "kl" else batch.inputs
        parts.clock.tick()
        assert parts.clock.index == index  # the schedule and the dropout keys agree
        last = i == len(plan.micro_batches) - 1
        with parts.accelerator.no_sync(model) if not last else nullcontext(), parts.autocast:
            nll = model(**to_device(inputs, device))  # float32 [B, T]; KL at replay positions with `kl`
            kinds = batch.kinds.to(device, non_blocking=True)
            loss = weigh_replay(nll, kinds, run.hyper.replay_weight).sum() / plan.loss_tokens * run.world_size
            parts.accelerator.backward(loss)
        flat = nll.detach().reshape(-1)  # the loss as measured, without the replay factor
        step_loss += flat.sum()
        kind_sums.scatter_add_(0, kinds, flat)
        kind_counts += np.bincount(batch.kinds.numpy(), minlength=len(KINDS) + 1)
        tokens += batch.tokens
        state.processed += batch.processed
        state.loss_tokens += int(batch.inputs["loss_rows"].shape[0])
    parts.accelerator.clip_grad_norm_(parts.params, MAX_GRAD_NORM)
    learning_rate = float(parts.scheduler.get_last_lr()[0])
    parts.optimizer.step()
    parts.scheduler.step()
    parts.optimizer.zero_grad(set_to_none=True)
    state.step += 1
    state.tokens += tokens
    state.forwards = parts.clock.forwards
    # summed over ranks at the same point of every rank's step, waited for when read
    reduced = torch.distributed.all_reduce(step_loss, async_op=True) if run.world_size > 1 else None
    return _Pending(
        state.step, step_loss, reduced, kind_sums, kind_counts, plan.loss_tokens, learning_rate, state.tokens, 0.0
    )


def _save(folder: Path, state: LoopState, parts: _Parts, measurements: Sequence[Measurement]) -> Path:
    """A checkpoint of the loop after `state.step` (`dlm.train.checkpoint`)."""
    from dlm.atomic import atomic_write_json

    def loop_state(path: Path) -> None:
        atomic_write_json(path / "state.json", {"loop": asdict(state)})

    def extra(path: Path) -> None:
        for measurement in measurements:
            measurement.save(path)

    return save_checkpoint(
        folder,
        state.step,
        {
            "adapter": parts.peft_model.save_pretrained,
            "optimizer": lambda path: torch.save(parts.optimizer.state_dict(), path / "optimizer.pt"),
            "scheduler": lambda path: torch.save(parts.scheduler.state_dict(), path / "scheduler.pt"),
            "measurements": extra,
            "state": loop_state,
        },
    )


def _load(folder: Path, peft_model: Any, optimizer: Any, scheduler: Any, measurements: Sequence[Measurement]) -> None:
    """Put a checkpoint's adapter, optimizer, schedule and measurements back."""
    from peft import set_peft_model_state_dict
    from safetensors.torch import load_file

    set_peft_model_state_dict(peft_model, load_file(str(folder / "adapter_model.safetensors")))
    optimizer.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=True))
    scheduler.load_state_dict(torch.load(folder / "scheduler.pt", weights_only=True))
    for measurement in measurements:
        measurement.load(folder)

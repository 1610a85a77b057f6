"""Run TRL's SFTTrainer with a peft LoRA adapter over prepared examples.

The dataset is already tokenized, windowed and packed (`dlm.train.dataset`), so TRL's
own preparation is skipped (`skip_prepare_dataset`) and `dlm.train.collator` makes the
batches: packed blocks carry per-example `position_ids` and no attention mask, which
transformers turns into a block-diagonal mask only when no KV cache is built, so the
run trains with `use_cache` off (`packed_attention`). Precision: `Hyperparameters.precision`
(`dlm.train.precision`); bfloat16 is autocast, on CUDA and on CPU alike. LoRA dropout
masks are keyed by the global micro-batch (`dlm.train.dropout`), so any number of ranks
trains the bytes of one process accumulating the same micro-batches. The loss never
materializes the logits (`fused_loss_trainer`, `dlm.train.lm_loss`). The Trainer saves no
checkpoint of its own accord (`save_strategy` "no"): a caller's callback asks for one
when due and publishes it atomically (`dlm.train.checkpoint`); the adapter itself is
saved once, at the end, by the caller.

Gradient checkpointing (TRL turns it on by default) recomputes every layer's forward
during backward to keep fewer activations: a quarter of a CPU step's compute (7.4 s
against 9.7 s of CPU time for SmolLM2-135M, 4 x 128 tokens) to save memory a CPU run
rarely lacks. It changes no number (the recomputed forward is the same arithmetic,
and the dropout masks are drawn again from their key, `dlm.train.dropout`), so it is off
unless the activations would take more than `ACTIVATION_SHARE` of the training
device's memory (`gradient_checkpointing`): RAM on a CPU or Apple GPU, the card's own
memory on CUDA. On an H100 it cost 1.8x per step for SmolLM2-135M (the demo, 40 steps:
33.0 s with it, 18.2 s without; peak GPU memory 0.97 GB against 1.74 GB of 80).
`training.gradient_checkpointing: true` or `false` overrides the rule.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import torch


class StepSink(Protocol):
    """Receives training progress; the CLI renders it, tests record it."""

    def on_train_start(self, total_steps: int) -> None: ...

    def on_step(
        self,
        step: int,
        loss: float | None,
        tokens_per_second: float | None,
        learning_rate: float | None,
        tokens_seen: int,
        seconds: float,
    ) -> None: ...


@dataclass(frozen=True)
class Hyperparameters:
    """Hyperparameters of one LoRA run (from `training:` plus CLI overrides)."""

    lora_r: int
    lora_alpha: int
    lora_dropout: float
    target_modules: tuple[str, ...]
    learning_rate: float
    max_steps: int | None
    num_epochs: float
    batch_size: int
    gradient_accumulation_steps: int
    seed: int
    precision: str = "float32"  # the resolved dtype name (`dlm.train.precision`)
    gradient_checkpointing: bool | None = None  # None: `gradient_checkpointing(...)` decides


@dataclass(frozen=True)
class LoraResult:
    """What training produced. `model` is the peft model (adapter not yet saved); in a
    bfloat16 run its frozen weights (the linears and the embedding table) are held in
    bfloat16 (`dlm.train.precision.hold_frozen_weights`), so it is scored under
    `scoring_precision` and never generates: a float32 answer needs a fresh base model."""

    model: Any
    steps: int
    train_loss: float | None
    tokens_seen: int
    seconds: float
    accelerator_peak_bytes: int | None = None  # torch.cuda.max_memory_allocated over the steps; None off CUDA
    hook_seconds: float = 0.0  # of `seconds`, spent in the caller's callbacks (measurements, checkpoints)

    @property
    def step_seconds(self) -> float:
        """Seconds of the training steps themselves: `seconds` less `hook_seconds`."""
        return max(self.seconds - self.hook_seconds, 0.0)

    @property
    def tokens_per_second(self) -> float | None:
        """Tokens processed per second of the steps (measurements between them excluded)."""
        return self.tokens_seen / self.step_seconds if self.step_seconds > 0 else None


class HookClock:
    """Adds up the wall time spent inside the callbacks it wraps (`timed`)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def timed(self, callbacks: list[Any]) -> list[Any]:
        """Each transformers `TrainerCallback` in `callbacks` wrapped so that every event it
        handles adds its duration to `seconds`; results (a `TrainerControl`) pass through."""
        from transformers import TrainerCallback

        clock = self

        def relay(name: str) -> Any:
            def event(self: Any, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return getattr(self.inner, name)(args, state, control, **kwargs)
                finally:
                    clock.seconds += time.perf_counter() - started

            return event

        events = {name: relay(name) for name in vars(TrainerCallback) if name.startswith("on_")}
        wrapped = []
        for callback in callbacks:
            # one class per wrapped class: the Trainer warns when two callbacks share a class
            proxy = type(f"Timed{type(callback).__name__}", (TrainerCallback,), events)()
            proxy.inner = callback
            wrapped.append(proxy)
        return wrapped


def fused_loss_trainer() -> Any:
    """An SFTTrainer whose loss is the LM head and cross-entropy fused (`dlm.train.lm_loss`).

    The loss equals the model's own (the same labels, -100 ignored and shifted, summed and
    divided by the batch's loss tokens as the Trainer's `num_items_in_batch` asks, scaled
    across ranks as the Trainer scales it) without materializing the logits. An instance's
    `on_token_nll`, when set, receives each training micro-batch's detached per-token NLL
    [B, T] (`dlm.train.kind_loss`), and `on_micro_batch` its labels [B, T]
    (`dlm.train.tracking.TokenTally`). A model the fused loss does not fit
    (`dlm.train.lm_loss.fusable`) is scored from its own logits, the same numbers with
    the logits' memory; a caller asking for the outputs gets `Trainer.compute_loss`.
    TRL's own chunked loss (its default on CUDA) is not used: it keeps no per-token NLL,
    computes entropy and accuracy metrics dlm does not log, and was slower and larger
    on a CPU (`benchmarks/train_step.py`).
    """
    from transformers import Trainer
    from trl import SFTTrainer

    from dlm.train.lm_loss import causal_lm_token_nll

    class FusedLossSFTTrainer(SFTTrainer):
        on_token_nll: Any = None
        on_micro_batch: Any = None

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if return_outputs:
                return Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)
            # the run's autocast around the LM head too: the Trainer autocasts the model's
            # forward only, and the head outside it ran in float32 (2.3x its bfloat16 time)
            with self.accelerator.autocast():
                nll = causal_lm_token_nll(model, inputs)
            if model.training:
                if self.on_micro_batch is not None:
                    self.on_micro_batch(inputs["labels"])
                if self.on_token_nll is not None:
                    self.on_token_nll(nll.detach())
            if num_items_in_batch is None:
                num_items_in_batch = (inputs["labels"][:, 1:] != -100).sum()
            loss = nll.sum() / num_items_in_batch
            if self.args.average_tokens_across_devices and self.model_accepts_loss_kwargs:
                # as Trainer.compute_loss: the gradients are averaged over ranks later
                tp_size = self.get_tp_size() if hasattr(self, "get_tp_size") else 1
                loss = loss * (self.accelerator.num_processes // tp_size if self.args.n_gpu <= 1 else self.args.n_gpu)
            return loss

    return FusedLossSFTTrainer


@contextmanager
def packed_attention(model: Any) -> Iterator[None]:
    """Turn the model's KV cache off for the block (restored after).

    transformers builds a `DynamicCache` on every forward while `config.use_cache` is
    on, training mode included, and with a cache it never looks at `position_ids` for
    packed sequences, so packed examples would attend to each other.
    """
    config = model.config
    before = config.use_cache
    config.use_cache = False
    try:
        yield
    finally:
        config.use_cache = before


PACKING_MODE = "padding_free"


def lock_hyperparameters(
    hyper: Hyperparameters, sequence_len: int, packing: bool, instruction_share: float | None
) -> dict[str, Any]:
    """The training settings the determinism lock hashes (`dlm.lock.record`).

    `precision` is left out (the lock records it as a field of its own, the dtype the
    run trained in), and so is `gradient_checkpointing` (it trades speed for memory and
    changes no number: `tests/test_lora_checkpointing.py`); `packing` is the packing mode
    (`PACKING_MODE`) or False, so a lock written when packing concatenated rows differs
    from one of padding-free blocks;
    `pad_to_multiple_of`, the multiple a micro-batch's length is rounded up to
    (`dlm.train.collator.pad_multiple`), which sets the shapes and so the last bits;
    `instruction_share` only when set, so locks written before it existed keep their hash;
    with LoRA dropout on, `dropout_masks` (`dlm.train.dropout.MASKS_MODE`), since locks
    written when the masks came from `torch.rand` describe other bytes.
    """
    from dlm.train.collator import pad_multiple
    from dlm.train.dropout import MASKS_MODE

    values = asdict(hyper)
    values.pop("precision")
    values.pop("gradient_checkpointing")  # memory only: the same numbers either way
    values.update(
        sequence_len=sequence_len,
        packing=PACKING_MODE if packing else False,
        pad_to_multiple_of=pad_multiple(sequence_len),
    )
    if hyper.lora_dropout > 0:
        values.update(dropout_masks=MASKS_MODE)
    if instruction_share is not None:
        values.update(instruction_share=instruction_share)
    return values


ACTIVATION_SHARE = 0.25


def activation_bytes(config: Any, micro_batch: int, sequence_len: int) -> int:
    """Estimated float32 bytes one forward pass keeps for backward without checkpointing.

    Per token and layer: about `6 * hidden + 4 * intermediate` values (norm, attention
    and MLP inputs, the gated MLP's three products) and `heads * sequence_len`
    attention weights; per token, the fused loss's gradient of its hidden state
    (`dlm.train.lm_loss`; no logits are kept). With the model's own loss, which kept
    three copies of the logits per token, SmolLM2-135M at 8 x 512 tokens was 8.8 GiB
    estimated and 9.0 GiB measured (peak RSS growth of one step).

    Args:
        config: a transformers model config (`hidden_size`, `num_hidden_layers`,
            `num_attention_heads`, `vocab_size`; `intermediate_size` else 4 x hidden).
        micro_batch: examples per forward pass.
        sequence_len: tokens per example (the longest).
    """
    hidden, layers = int(config.hidden_size), int(config.num_hidden_layers)
    intermediate = int(getattr(config, "intermediate_size", None) or 4 * hidden)
    per_layer = 6 * hidden + 4 * intermediate + int(config.num_attention_heads) * sequence_len
    tokens = micro_batch * sequence_len
    return 4 * tokens * (layers * per_layer + hidden)


def physical_memory() -> int | None:
    """Bytes of RAM on this machine, None where the OS does not say (then checkpoint)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def peak_rss_bytes() -> int | None:
    """This process's peak resident set size in bytes so far (`getrusage`: kilobytes on
    Linux, bytes on macOS); None where the `resource` module is missing (Windows)."""
    try:
        import resource
    except ImportError:
        return None
    peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return peak if sys.platform == "darwin" else peak * 1024


def device_memory(device: str) -> int | None:
    """Bytes of memory the training `device` holds activations in: the current CUDA
    card's total memory, else RAM (a CPU, or an Apple GPU's unified memory); None where
    unknown."""
    if device == "cuda":
        try:
            return int(torch.cuda.get_device_properties(torch.cuda.current_device()).total_memory)
        except (RuntimeError, AssertionError):
            return None
    return physical_memory()


def gradient_checkpointing(activations: int | None, memory: int | None) -> bool:
    """Whether to checkpoint (module docstring): when the `activations` estimate (bytes)
    exceeds `ACTIVATION_SHARE` of the device's `memory` (bytes), or either is unknown."""
    if activations is None or memory is None:
        return True
    return activations > ACTIVATION_SHARE * memory


def _pad_id(tokenizer: Any) -> int:
    pad = getattr(tokenizer, "pad_token_id", None)
    return int(pad) if pad is not None else int(tokenizer.eos_token_id)


def _callback(sink: StepSink) -> Any:
    from transformers import TrainerCallback

    class _Relay(TrainerCallback):
        def __init__(self) -> None:
            self.t0 = time.perf_counter()

        def on_train_begin(self, args, state, control, **kwargs):  # noqa: ANN001
            self.t0 = time.perf_counter()
            sink.on_train_start(state.max_steps)

        def on_log(self, args, state, control, logs=None, **kwargs):  # noqa: ANN001
            logs = logs or {}
            if "loss" not in logs:
                return
            elapsed = time.perf_counter() - self.t0
            seen = int(state.num_input_tokens_seen or 0)
            sink.on_step(
                state.global_step,
                float(logs["loss"]),
                seen / elapsed if elapsed > 0 else None,
                logs.get("learning_rate"),
                seen,
                elapsed,
            )

    return _Relay()


def train_lora(
    model: Any,
    tokenizer: Any,
    dataset: Any,
    hyper: Hyperparameters,
    work_dir: Path,
    sink: StepSink,
    trainer_cls: Any = None,
    callbacks: list[Any] | None = None,
    sequence_len: int | None = None,
    resume_from: Path | None = None,
    on_token_nll: Any = None,
    on_micro_batch: Any = None,
) -> LoraResult:
    """Wrap `model` with a LoRA adapter and train it on `dataset`.

    Args:
        model: a base causal LM (float32).
        dataset: map-style dataset of `{"input_ids", "labels"}` examples.
        work_dir: scratch folder for the trainer (checkpoints are written there first).
        trainer_cls: an SFTTrainer class; default `fused_loss_trainer()`.
        callbacks: more transformers `TrainerCallback`s (the held-out loss hook); the time
            they take is `LoraResult.hook_seconds`, not counted in the step rate.
        sequence_len: the longest example in tokens; with it a CPU run may skip gradient
            checkpointing (`gradient_checkpointing`), without it the run checkpoints.
        resume_from: a Trainer checkpoint folder to continue from (adapter, optimizer,
            scheduler, RNG states and step; the Trainer skips the batches already seen).
        on_token_nll: called with each training micro-batch's detached per-token NLL
            (float32 [B, T], `dlm.train.lm_loss.causal_lm_token_nll`), as the per-kind
            loss wants it (`dlm.train.kind_loss.KindLoss.see_nll`).
        on_micro_batch: called with the labels (int64 [B, T], -100: no loss) of each
            micro-batch trained, and of no other (`dlm.train.tracking.TokenTally`).

    Raises:
        KeyboardInterrupt: propagated untouched so the caller can keep the store intact.
    """
    from peft import LoraConfig
    from transformers import PrinterCallback
    from trl import SFTConfig

    from dlm.train.attention import use_float32_cpu_attention
    from dlm.train.collator import PackedCollator, pad_multiple
    from dlm.train.dropout import install_keyed_dropout
    from dlm.train.memory import limit_heap_growth, release_freed_memory
    from dlm.train.precision import hold_frozen_weights, training_device
    from dlm.train.shared_cast import share_lora_input_casts
    from dlm.train.swiglu import recompute_silu_products

    activations = activation_bytes(model.config, hyper.batch_size, sequence_len) if sequence_len else None
    config = SFTConfig(
        output_dir=str(work_dir),
        per_device_train_batch_size=hyper.batch_size,
        gradient_accumulation_steps=hyper.gradient_accumulation_steps,
        learning_rate=hyper.learning_rate,
        max_steps=hyper.max_steps if hyper.max_steps is not None else -1,
        num_train_epochs=hyper.num_epochs,
        seed=hyper.seed,
        data_seed=hyper.seed,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
        bf16=hyper.precision == "bfloat16",
        max_length=None,
        remove_unused_columns=False,
        dataset_kwargs={"skip_prepare_dataset": True},
        include_num_input_tokens_seen="non_padding",
        optim="adamw_torch",
        gradient_checkpointing=hyper.gradient_checkpointing
        if hyper.gradient_checkpointing is not None
        else gradient_checkpointing(activations, device_memory(training_device())),
    )
    peft_config = LoraConfig(
        r=hyper.lora_r,
        lora_alpha=hyper.lora_alpha,
        lora_dropout=hyper.lora_dropout,
        target_modules=sorted(hyper.target_modules),
        task_type="CAUSAL_LM",
    )
    clock = HookClock()
    with warnings.catch_warnings():
        # transformers' own deprecation notices about arguments TRL passes are noise here
        warnings.simplefilter("ignore", FutureWarning)
        trainer_cls = trainer_cls or fused_loss_trainer()
        trainer = trainer_cls(
            model=model,
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
            data_collator=PackedCollator(
                _pad_id(tokenizer), pad_multiple(sequence_len) if sequence_len else 1, max_length=sequence_len
            ),
            callbacks=[_callback(sink), *clock.timed(callbacks or [])],
        )
    trainer.on_token_nll = on_token_nll
    trainer.on_micro_batch = on_micro_batch
    # after peft's wrap, so LoRA's weights are created (and initialized) in float32
    hold_frozen_weights(trainer.model, hyper.precision)
    if hyper.precision == "bfloat16":
        share_lora_input_casts(trainer.model)
    recompute_silu_products(trainer.model)
    use_float32_cpu_attention()
    # stdout belongs to the command (`--json`); progress goes through `sink`
    trainer.remove_callback(PrinterCallback)
    done = 0  # micro-batches this process trained before the checkpoint it resumes from
    if resume_from is not None:
        state = json.loads((Path(resume_from) / "trainer_state.json").read_text(encoding="utf-8"))
        done = int(state.get("global_step") or 0) * hyper.gradient_accumulation_steps
    install_keyed_dropout(
        trainer.model, hyper.seed, trainer.accelerator.process_index, trainer.accelerator.num_processes, forwards=done
    )
    limit_heap_growth()
    # tokenization and the held-out "before" pass leave freed heap behind: give it back
    # before the steps build their own working set
    release_freed_memory()
    on_cuda = training_device() == "cuda"
    if on_cuda:
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    with packed_attention(trainer.model):
        output = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
    seconds = time.perf_counter() - t0
    from accelerate.utils import extract_model_from_parallel

    return LoraResult(
        # without accelerate's mixed-precision wrapper: the caller scores it (held-out loss,
        # probes) in the training precision, as the steps ran
        model=extract_model_from_parallel(trainer.model, keep_fp32_wrapper=False),
        steps=int(trainer.state.global_step),
        train_loss=float(output.training_loss) if output.training_loss is not None else None,
        tokens_seen=int(trainer.state.num_input_tokens_seen or 0),
        seconds=seconds,
        accelerator_peak_bytes=int(torch.cuda.max_memory_allocated()) if on_cuda else None,
        hook_seconds=clock.seconds,
    )

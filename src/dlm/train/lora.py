"""What a LoRA run is: its hyperparameters, what the lock hashes of them, its result, and
the rule that turns gradient checkpointing on.

The loop itself is `dlm.train.loop`; every change to the model is `dlm.train.model`.

Gradient checkpointing recomputes every layer's forward during backward to keep fewer
activations: a quarter of a step's compute, to save memory a CPU run rarely lacks. It
changes no number (the recomputed forward is the same arithmetic, and the dropout masks
are drawn again from their key, `dlm.train.dropout`), so it is off unless the
activations of the run's largest micro-batch, as its examples' lengths allow
(`run_activation_bytes`), would take more than `ACTIVATION_SHARE` of the training
device's memory (`gradient_checkpointing`): RAM on a CPU or Apple GPU, the card's own
memory on CUDA.
`training.gradient_checkpointing: true` or `false` overrides the rule.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass
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
    replay_loss: str = "kl"  # `training.replay_loss`: "ce" or "kl" (`dlm.train.replay_kl`)
    replay_weight: float = 1.0  # `training.replay_weight`: a replay position's factor in the loss


@dataclass(frozen=True)
class LoraResult:
    """What training produced (on this rank). `model` is the peft model (adapter not yet
    saved); in a bfloat16 run its frozen weights (the linears and the embedding table) are held in
    bfloat16 (`dlm.train.precision.hold_frozen_weights`), so it is scored under
    `scoring_precision` and never generates: a float32 answer needs a fresh base model."""

    model: Any
    steps: int
    train_loss: float | None
    tokens_seen: int
    seconds: float
    accelerator_peak_bytes: int | None = None  # torch.cuda.max_memory_allocated over the steps; None off CUDA
    hook_seconds: float = 0.0  # of `seconds`, spent measuring and checkpointing between steps
    tokens_before: int = 0  # of `tokens_seen`, trained before the checkpoint a run resumed from
    processed_tokens: int = 0  # tokens fed to the model, padding included (a resumed run's earlier steps too)
    loss_tokens: int = 0  # tokens whose label was predicted (likewise)

    @property
    def real_token_fraction(self) -> float | None:
        """The share of processed tokens that carried loss."""
        return self.loss_tokens / self.processed_tokens if self.processed_tokens else None

    @property
    def padding_fraction(self) -> float | None:
        """The share of processed tokens that were padding."""
        return 1.0 - self.tokens_seen / self.processed_tokens if self.processed_tokens else None

    @property
    def step_seconds(self) -> float:
        """Seconds of the training steps themselves: `seconds` less `hook_seconds`."""
        return max(self.seconds - self.hook_seconds, 0.0)

    @property
    def tokens_per_second(self) -> float | None:
        """Tokens trained per second of this process's steps (measurements excluded)."""
        return (self.tokens_seen - self.tokens_before) / self.step_seconds if self.step_seconds > 0 else None


PACKING_MODE = "padding_free"
LOOP_MODE = "dlm-loop-1"  # `dlm.train.loop`: AdamW, linear decay, clip 1.0, one step's tokens as divisor


def lock_hyperparameters(
    hyper: Hyperparameters,
    sequence_len: int,
    packing: bool,
    instruction_share: float | None,
    replay_share: float | None = None,
    synth_repeats: int | None = None,
) -> dict[str, Any]:
    """The training settings the determinism lock hashes (`dlm.lock.record`).

    `precision` is left out (the lock records it as a field of its own, the dtype the
    run trained in), and so is `gradient_checkpointing` (it trades speed for memory and
    changes no number: `tests/test_lora_checkpointing.py`); `packing` is the packing mode
    (`PACKING_MODE`) or False, so a lock written when packing concatenated rows differs
    from one of padding-free blocks;
    `order`, the rule that orders and pads micro-batches (`dlm.train.data.ORDER_MODE`),
    which sets the shapes and so the last bits, and without packing `rows`, the layout of
    a micro-batch of windows (`dlm.train.shared_prefix.ROW_MODE`); `loop`, the training loop's version
    (`LOOP_MODE`), since the same settings trained other bytes under another loop;
    `instruction_share` and `replay_share` only when set, and `replay_loss` with the
    replay share (without replay rows it changes nothing), `replay_weight` too when it is
    not 1 (a factor of 1 trains the bytes of the loss without one); `synth_repeats`, the sightings of
    each synth pair (`dlm.train.recipe.SYNTH_REPEATS`, a constant of the code, not the
    document), only when synth rows train; with LoRA dropout on, `dropout_masks`
    (`dlm.train.dropout.MASKS_MODE`).
    """
    from dlm.train.data import ORDER_MODE
    from dlm.train.dropout import MASKS_MODE
    from dlm.train.shared_prefix import ROW_MODE

    values = asdict(hyper)
    values.pop("precision")
    values.pop("gradient_checkpointing")  # memory only: the same numbers either way
    replay_loss, replay_weight = values.pop("replay_loss"), values.pop("replay_weight")
    values.update(
        sequence_len=sequence_len,
        packing=PACKING_MODE if packing else False,
        order=ORDER_MODE,
        loop=LOOP_MODE,
    )
    if not packing:
        values.update(rows=ROW_MODE)
    if hyper.lora_dropout > 0:
        values.update(dropout_masks=MASKS_MODE)
    if instruction_share is not None:
        values.update(instruction_share=instruction_share)
    if replay_share is not None:
        values.update(replay_share=replay_share, replay_loss=replay_loss)
        if replay_weight != 1.0:  # 1 trains the bytes of a loss without the factor
            values.update(replay_weight=replay_weight)
    if synth_repeats is not None:
        values.update(synth_repeats=synth_repeats)
    return values


ACTIVATION_SHARE = 0.25


def activation_bytes(config: Any, micro_batch: int, sequence_len: int) -> int:
    """Estimated float32 bytes one forward pass keeps for backward without checkpointing.

    Per token and layer: about `6 * hidden + 4 * intermediate` values (norm, attention
    and MLP inputs, the gated MLP's three products) and `heads * sequence_len`
    attention weights; per token, the fused loss's gradient of its hidden state
    (`dlm.train.lm_loss`; no logits are kept). The same per-token terms, with three
    copies of the logits for a model's own loss, were checked against one step's peak RSS
    growth (docs/benchmarks.md, "Activation estimate").

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


def run_activation_bytes(config: Any, micro_batch: int, lengths: Any, sequence_len: int) -> int:
    """`activation_bytes` of the largest micro-batch a run can form from examples of
    `lengths`. When the `micro_batch` longest examples fit in `sequence_len` together,
    every micro-batch trains as one row (`dlm.train.shared_prefix`) of at most their
    tokens; otherwise a micro-batch may keep one example per row, `micro_batch` rows of
    the longest example's padded width (`dlm.train.data.padded_length`), or be one row
    of `sequence_len`. So a document of short Q/A pairs with `sequence_len` 2048
    checkpoints only if its own examples would not fit, not because 2048-token rows might.

    Args:
        config: the base model's config (`activation_bytes`).
        micro_batch: examples per micro-batch.
        lengths: 1-D int [n_examples], tokens per example (`dataset.lengths`).
        sequence_len: the run's `sequence_len`.
    """
    import numpy as np

    from dlm.train.data import padded_length

    ordered = np.sort(np.asarray(lengths, dtype=np.int64))[::-1]
    top = int(ordered[:micro_batch].sum())
    if top <= sequence_len:
        return activation_bytes(config, 1, padded_length(max(top, 1), sequence_len))
    longest = padded_length(int(ordered[0]), sequence_len)
    return max(activation_bytes(config, micro_batch, longest), activation_bytes(config, 1, sequence_len))


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

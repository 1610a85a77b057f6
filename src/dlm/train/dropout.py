"""LoRA dropout whose masks depend on the global micro-batch, not on the process.

peft draws LoRA dropout masks from torch's global generator, so each rank of a
multi-process run, seeded alike, draws the same masks for different micro-batches, and
the masks one process draws while accumulating micro-batches differ from either: `--nproc
2` and one process with 2 accumulation steps then write different adapter bytes.
`install_keyed_dropout` replaces each `nn.Dropout` of a peft model's `lora_dropout`
with `KeyedDropout`, whose mask for a forward pass is drawn from a fresh generator seeded
with a key of three integers:

    key = blake2b-64(seed, global micro-batch index, dropout module index)

The mask (`keep_mask`): on a CPU, NumPy's SFC64 generator seeded with the key gives 64-bit
words, read as little-endian 16-bit numbers `u`, one per element, and an element is kept
when `u >= round(p * 65536)`; the kept ones are scaled by `65536 / (65536 - round(p *
65536))`, so the drop probability is `p` rounded to 1/65536 (0.05 drops 3277/65536) and
the expected output is the input. Not `torch.rand` (MT19937, one 32-bit draw per
element): the demo's 4 x 128 tokens on every linear layer need 77 million mask elements
per step, and SFC64 draws them in fewer operations than MT19937 (docs/benchmarks.md,
"LoRA dropout"). On a
GPU the mask is `torch.rand(...) >= p` from a device generator seeded with the key, drawn
where the tensor lives.

- seed: the run's `training.seed`;
- global micro-batch index: the schedule hands rank `r` of `W` the micro-batches
  `r, r + W, r + 2W, ...` of the one shuffled order (`dlm.train.data`),
  so the `j`-th training forward of rank `r` is micro-batch `j * W + r`; with one
  process (`W = 1`) it is simply `j`, the same index for the same examples;
- dropout module index: the module's place in the model's sorted module names.

The training loop ticks the clock before each training forward (evaluation forwards do
not), so recomputed forwards under gradient checkpointing, which run inside backward,
replay the mask of their own micro-batch. Masks keep nn.Dropout's
semantics: an element is zeroed with probability `p` (on a CPU `p` rounded to
1/65536, `keep_mask`) and the rest are scaled by one over the share kept.
"""

from __future__ import annotations

import hashlib
import math
import struct

import numpy as np
import torch
from torch import nn


class MicroBatchClock:
    """The global index of the micro-batch being trained (module docstring); the training
    loop sets `index` before each forward."""

    def __init__(self, rank: int = 0, world_size: int = 1, forwards: int = 0) -> None:
        self.rank, self.world_size = rank, world_size
        self.forwards = forwards  # training forwards begun on this process (a resumed run: before it too)
        self.index = -1

    def tick(self) -> None:
        """Move to this rank's next micro-batch: `forwards * world_size + rank`."""
        self.index = self.forwards * self.world_size + self.rank
        self.forwards += 1


class KeyedDropout(nn.Module):
    """nn.Dropout with a mask keyed by (seed, global micro-batch, module index)."""

    def __init__(self, p: float, seed: int, module_index: int, clock: MicroBatchClock) -> None:
        super().__init__()
        self.p, self.seed, self.module_index, self.clock = p, seed, module_index, clock

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`x` (any shape and float dtype) with elements zeroed at probability `p`, the
        rest scaled by one over the share kept (`keep_mask`); unchanged in eval mode."""
        if not self.training or self.p == 0:
            return x
        keep, kept_share = keep_mask(
            x.shape, self.p, mask_key(self.seed, self.clock.index, self.module_index), x.device
        )
        # multiplied by the bool mask itself: autograd keeps 1 byte per element for
        # backward instead of 4 for a float copy
        return x * keep / kept_share

    def extra_repr(self) -> str:
        return f"p={self.p}, module_index={self.module_index}"


MASK_LEVELS = 65536  # a CPU mask element is one 16-bit draw
# the mask scheme, part of the settings the lock hashes (`dlm.train.lora.lock_hyperparameters`):
# the masks drawn by `torch.rand` before it gave other bytes for the same document
MASKS_MODE = "keyed-sfc64"


def keep_mask(shape: torch.Size, p: float, key: int, device: torch.device) -> tuple[torch.Tensor, float]:
    """The keep mask of one dropout call (module docstring) and the share of elements it
    keeps in expectation, the divisor of the kept ones.

    Returns:
        `(keep, share)`: `keep` bool of `shape` on `device`; `share` = 1 - the drop
        probability actually used (on a CPU `p` rounded to 1/65536; elsewhere `p`).
    """
    if device.type != "cpu":
        generator = torch.Generator(device=device)
        generator.manual_seed(key)
        return torch.rand(shape, generator=generator, device=device) >= p, 1.0 - p
    threshold = min(round(p * MASK_LEVELS), MASK_LEVELS - 1)
    n = math.prod(shape)
    words = np.random.SFC64(key).random_raw((n + 3) // 4)
    draws = np.asarray(words, dtype="<u8").view("<u2")[:n]
    return torch.from_numpy(draws >= threshold).view(shape), (MASK_LEVELS - threshold) / MASK_LEVELS


def mask_key(seed: int, micro_batch: int, module_index: int) -> int:
    """A 63-bit generator seed from three integers (blake2b, 8 bytes, little-endian)."""
    digest = hashlib.blake2b(struct.pack("<qqq", seed, micro_batch, module_index), digest_size=8).digest()
    return int.from_bytes(digest, "little") & (2**63 - 1)


def install_keyed_dropout(model: nn.Module, seed: int, clock: MicroBatchClock) -> int:
    """Swap every `nn.Dropout` inside a peft model's `lora_dropout` dicts for a
    `KeyedDropout` of the same `p` reading `clock`, whose index the training loop sets
    before each forward (`dlm.train.loop`).

    Consumes no random numbers, so the adapter's initialization is untouched.

    Returns:
        The number of dropout modules replaced (0 when `lora_dropout` is 0: peft then
        uses `nn.Identity` and nothing needs keying).
    """
    replaced = 0
    for name, module in sorted(model.named_modules(), key=lambda item: item[0]):
        if not name.endswith("lora_dropout") or not isinstance(module, nn.ModuleDict):
            continue
        for adapter, dropout in list(module.items()):
            if isinstance(dropout, nn.Dropout):
                module[adapter] = KeyedDropout(dropout.p, seed, replaced, clock)
                module[adapter].train(dropout.training)
                replaced += 1
    return replaced

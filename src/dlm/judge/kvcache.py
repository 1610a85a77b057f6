"""A key/value cache for batched greedy answers that is written in place, not grown.

transformers' default cache (`DynamicCache`) concatenates every decoding step's keys and
values onto the ones before: for each layer a new `[B, kv_heads, n + 1, head_dim]` tensor
per token, the old one freed. In the probe report's answer pass (30 rows: 10 questions
on the base, the adapter and the null adapter; SmolLM2's 30 layers, 3 key/value heads
of 64, float32) the cache ends at about 0.17 GB, but each step's copies are a little
larger than the holes the last step's left, so the heap they come from keeps growing.

`PreallocatedCache` gives each layer one buffer for keys and one for values, sized for
the prompt and `max_new_tokens` when the prompt's states arrive, and writes each step's
states into the next free positions. The model reads a view of the positions written
so far: the same values, in the same shapes, as the concatenated tensors, so greedy
answers are the same token for token (tests/judge/test_kvcache.py).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer


class _InPlaceLayer(DynamicLayer):
    """One layer's keys and values in buffers of `capacity` positions (grown only if a
    call brings more; module docstring). `keys`/`values` are views of the written part."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None
        self._length = 0

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        """Write `key_states`/`value_states` `[B, kv_heads, new, head_dim]` after the
        positions already held; return views `[B, kv_heads, held + new, head_dim]`."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self._length + key_states.shape[-2]
        if self._buffers is None or end > self._buffers[0].shape[-2]:
            self._buffers = self._grown(key_states, value_states, max(end, self.capacity))
        keys, values = self._buffers
        keys[..., self._length : end, :] = key_states
        values[..., self._length : end, :] = value_states
        self._length = end
        self.keys, self.values = keys[..., :end, :], values[..., :end, :]
        return self.keys, self.values

    def _grown(
        self, key_states: torch.Tensor, value_states: torch.Tensor, size: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        keys, values = (new.new_empty((*new.shape[:-2], size, new.shape[-1])) for new in (key_states, value_states))
        if self._buffers is not None:
            for buffer, old in zip((keys, values), self._buffers, strict=True):
                buffer[..., : self._length, :] = old[..., : self._length, :]
        return keys, values

    def reset(self) -> None:
        self._buffers, self._length = None, 0
        super().reset()

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("PreallocatedCache serves greedy decoding, which never crops")

    def batch_repeat_interleave(self, repeats: int) -> None:
        raise NotImplementedError("PreallocatedCache serves greedy decoding, which never repeats rows")

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        raise NotImplementedError("PreallocatedCache serves greedy decoding, which never selects rows")


class PreallocatedCache(DynamicCache):
    """A `DynamicCache` whose layers write in place (module docstring).

    Args:
        capacity: positions each layer's buffers hold, prompt and generated tokens
            together (`prompt width + max_new_tokens` for `model.generate`).
    """

    def __init__(self, capacity: int) -> None:
        super().__init__()
        # the Cache appends a layer from this for each layer index it has not seen yet
        self.layer_class_to_replicate = partial(_InPlaceLayer, capacity)  # type: ignore[assignment]

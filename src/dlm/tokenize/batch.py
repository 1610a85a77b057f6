"""Text batches to compact id arrays and stored payloads, one batch ahead of the caller.

- `encode_texts`: the backend's fastest batch encode that gives ids
  (`encode_batch_fast`: no character offsets, which `dlm` never stores; the Rust
  encoder runs on all cores with the GIL released), ids straight into uint16|uint32
  arrays. `tokenizers` hands ids out only as Python lists, so one Python int per id
  is made once and dropped at once; nothing else is per id.
- `pack_rows`: each row's ids as one zstd frame of little-endian ids plus its xxh3_64
  checksum (zstd and xxhash release the GIL on their buffers).
- `AheadPipeline`: a bounded producer/consumer over one worker thread. The caller
  submits batch N+1 (reading files, hashing keys, looking up the index on its own
  thread) while the worker encodes and packs batch N; results come back in order,
  at most `depth` batches are in flight, so memory stays bounded by batch bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np

UINT16_LIMIT = 1 << 16

T = TypeVar("T")
R = TypeVar("R")


def encode_texts(backend: Any, texts: Sequence[str], add_special_tokens: bool) -> list[list[int]]:
    """Ids of each text (lists of ints), through `encode_batch_fast` when the backend has it.

    `encode_batch_fast` and `encode_batch` give the same ids; the fast one skips the
    byte-to-character offset mapping. A backend without it (an older `tokenizers`, a
    test double) is called through `encode_batch`.
    """
    if not texts:
        return []
    fast = getattr(backend, "encode_batch_fast", None)
    if fast is not None:
        encodings = fast(list(texts), add_special_tokens=add_special_tokens)
    else:
        encodings = backend.encode_batch(list(texts), add_special_tokens=add_special_tokens)
    return [e.ids for e in encodings]


def compact_ids(ids: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """Ids as 1-D `dtype` (uint16|uint32), widened to uint32 when the row's real max needs it.

    Raises:
        OverflowError: an id is negative or >= 2**32 (callers name the tokenizer).
    """
    wide = np.array(ids, dtype=np.uint32)
    if dtype == np.uint16 and (wide.size == 0 or int(wide.max()) < UINT16_LIMIT):
        return wide.astype(np.uint16)
    return wide


@dataclass(frozen=True)
class PackedRows:
    """Stored form of a batch of rows: per row its zstd frame and the frame's checksum."""

    payloads: list[bytes]
    checksums: list[int]


def pack_rows(
    rows: Sequence[np.ndarray], compress: Callable[[bytes], bytes], checksum: Callable[[bytes], int]
) -> PackedRows:
    """Compress each row's little-endian ids (`compress`: one zstd frame) and checksum the frame."""
    payloads = [compress(ids.astype(ids.dtype.newbyteorder("<"), copy=False).tobytes()) for ids in rows]
    return PackedRows(payloads, [checksum(p) for p in payloads])


class AheadPipeline(Generic[T, R]):
    """Run `work(item)` on one worker thread, at most `depth` items ahead of the caller.

    `submit` queues an item and returns the results that are due, in submission
    order: it blocks only when more than `depth` items are in flight. `drain` returns
    the rest. An exception raised by `work` is raised again by the `submit` or `drain`
    that returns its result; `close` cancels what is still queued and waits for the
    worker (always call it, e.g. in a `finally`).
    """

    def __init__(self, work: Callable[[T], R], depth: int = 1) -> None:
        self.work = work
        self.depth = depth
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dlm-encode")
        self.inflight: deque[Future[R]] = deque()

    def submit(self, item: T) -> list[R]:
        self.inflight.append(self.pool.submit(self.work, item))
        done: list[R] = []
        while len(self.inflight) > self.depth or (self.inflight and self.inflight[0].done()):
            done.append(self.inflight.popleft().result())
        return done

    def drain(self) -> list[R]:
        done: list[R] = []
        while self.inflight:
            done.append(self.inflight.popleft().result())
        return done

    def close(self) -> None:
        for future in self.inflight:
            future.cancel()
        self.inflight.clear()
        self.pool.shutdown(wait=True)

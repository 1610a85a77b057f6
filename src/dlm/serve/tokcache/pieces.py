"""A small exact cache of the short pieces prompts end with (see `PieceCache`)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence


class PieceCache:
    """Ids (no special tokens added) of short pieces of prompt text between boundaries,
    such as the chat template's `<|im_end|>\n` and `<|im_start|>assistant\n`, keyed by
    their exact UTF-8 bytes.

    A piece starts with an added token, or at the start of a prompt; either way the same
    bytes always start the same way, and `plan.py` shows a piece's ids do not depend on
    the text around it, so its bytes decide its ids. Every chat prompt ends with such
    pieces; a dictionary lookup of their bytes costs far less than the tokenizer encoding
    them with the rest. Bounded: pieces of at most `MAX_PIECE_BYTES`, at most `MAX_PIECES` of them
    (least recently used evicted): about 2.5 MiB in the worst case (64 ids of their
    own int objects per piece), a few KiB for a chat template's pieces; not counted in
    the levels' bytes.
    """

    MAX_PIECE_BYTES = 64
    MAX_PIECES = 1024

    def __init__(self) -> None:
        self._data: OrderedDict[bytes, tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, piece: bytes) -> tuple[int, ...] | None:
        """The ids of `piece` (no special tokens added), or None (always for a piece
        longer than `MAX_PIECE_BYTES`)."""
        if len(piece) > self.MAX_PIECE_BYTES:
            return None
        with self._lock:
            ids = self._data.get(piece)
            if ids is not None:
                self._data.move_to_end(piece)
            return ids

    def put(self, piece: bytes, ids: Sequence[int]) -> None:
        """Remember `ids` for `piece` when it is short enough."""
        if len(piece) > self.MAX_PIECE_BYTES:
            return
        with self._lock:
            self._data[piece] = tuple(ids)
            self._data.move_to_end(piece)
            while len(self._data) > self.MAX_PIECES:
                self._data.popitem(last=False)

    def clear(self) -> None:
        """Forget every piece."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def peel(self, data: bytes, starts: Iterable[int]) -> tuple[int, list[tuple[int, tuple[int, ...]]]]:
        """Peel known pieces off the end of `data`, given boundaries deepest first:
        (where the unknown part ends, the peeled pieces as (byte offset, ids) in text
        order)."""
        peeled: list[tuple[int, tuple[int, ...]]] = []
        end = len(data)
        for start in starts:
            piece = self.get(data[start:end])
            if piece is None:
                break
            peeled.append((start, piece))
            end = start
        peeled.reverse()
        return end, peeled

    def learn(self, data: bytes, ids: Sequence[int], cuts: Iterable[tuple[int, int]]) -> None:
        """Remember the short pieces `data` ends with, given its ids and, deepest first,
        its boundaries as (byte offset in `data`, index in `ids` of the token starting
        there): each piece runs from one boundary to the next (or the end)."""
        end, end_id = len(data), len(ids)
        for start, first_id in cuts:
            if end - start > self.MAX_PIECE_BYTES:
                return
            self.put(data[start:end], ids[first_id:end_id])
            end, end_id = start, first_id

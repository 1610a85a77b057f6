"""Generated ids to reply text, with OpenAI's `stop` strings, one id at a time.

A reply is decoded from all its ids at once (`tokenizer.decode(ids)`), never by
joining the decodings of single ids: byte-level BPE splits one character over
several ids, and SentencePiece decoders drop the leading space of a first piece,
so only the whole sequence decodes right. Text is released only once it cannot
change:

- a trailing U+FFFD may be the first bytes of a character still being generated;
- a suffix that is the beginning of a stop string may become that stop string with
  the next id (the stop string is never shown, so neither is its beginning).

A stop string is matched on the decoded text, wherever the id boundaries fall;
the reply ends before its earliest occurrence. Decoding the whole reply per id
costs O(n) per step for n ids so far: tens of microseconds at the 4,096-id limit,
against milliseconds for a decoding step of the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

_PENDING = "\ufffd"


@dataclass
class Step:
    """What one id changed.

    Attributes:
        text: newly released reply text ("" when nothing can be released yet).
        stopped: a stop string was found; the reply is complete (do not generate more).
    """

    text: str
    stopped: bool = False


class TextStream:
    """Accumulates generated ids and releases reply text safe to show.

    Args:
        tokenizer: has `decode(ids: list[int], skip_special_tokens=True) -> str`.
        stop: stop strings (each non-empty); the reply ends before the first found.
        skip_ids: ids never part of the text (EOS), still counted in `n_ids`.
    """

    def __init__(self, tokenizer: Any, stop: list[str] | tuple[str, ...] = (), skip_ids: frozenset[int] = frozenset()):
        self._tok = tokenizer
        self._stop = tuple(s for s in stop if s)
        self._skip = skip_ids
        self._ids: list[int] = []
        self._released = 0  # characters of the decoded text already handed out
        self.n_ids = 0
        self.stopped = False

    def push(self, token_id: int) -> Step:
        """Add one generated id; the text it releases (see module docstring)."""
        if self.stopped:
            raise RuntimeError("push after a stop string ended the reply")
        self.n_ids += 1
        if token_id in self._skip:
            return Step("")
        self._ids.append(token_id)
        text = self._tok.decode(self._ids, skip_special_tokens=True)
        found = self._find_stop(text)
        if found is not None:
            self.stopped = True
            out = text[self._released : max(found, self._released)]
            self._released = max(found, self._released)
            return Step(out, stopped=True)
        safe = len(text) - self._held_back(text)
        if safe <= self._released:
            return Step("")
        out = text[self._released : safe]
        self._released = safe
        return Step(out)

    def finish(self) -> str:
        """The text still held back, once no id will follow (after EOS or the budget)."""
        if self.stopped or not self._ids:
            return ""
        text = self._tok.decode(self._ids, skip_special_tokens=True)
        out = text[self._released :]
        self._released = len(text)
        return out

    def _find_stop(self, text: str) -> int | None:
        if not self._stop:
            return None
        longest = max(map(len, self._stop))
        # a match must end in text not released yet: start the search early enough
        begin = max(0, self._released - longest + 1)
        hits = [at for s in self._stop if (at := text.find(s, begin)) >= 0]
        return min(hits) if hits else None

    def _held_back(self, text: str) -> int:
        """Characters at the end of `text` that may still change or start a stop string."""
        held = 0
        if text.endswith(_PENDING):
            held = len(text) - len(text.rstrip(_PENDING))
        body = text[: len(text) - held]
        for stop in self._stop:
            for n in range(min(len(stop) - 1, len(body)), 0, -1):
                if body.endswith(stop[:n]):
                    held = max(held, len(text) - len(body) + n)
                    break
        return held

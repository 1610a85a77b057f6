"""A deterministic engine behind the server's `Engine` Protocol, for fast app tests.

It replies with the words of the last user message in reverse order (or a fixed
`script`), yielding the reply's ids one per step and then EOS, with an optional
delay per step; it records the prompts it was given, how many ids it yielded, and
how many generations ran at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from dlm.infer.decode import Sampling

SYSTEM = "You answer in one short sentence."


def expected_text(words: str) -> str:
    return " ".join(words.split()[::-1])


class FakeEngine:
    def __init__(
        self,
        tokenizer: Any,
        *,
        script: str | None = None,
        fail: bool = False,
        delay: float = 0.0,
        eos: bool = True,
    ):
        self.tokenizer = tokenizer
        self.model_id = "dlm:fake"
        self.system_prompt: str | None = SYSTEM
        self.max_model_len = 2048
        self.eos_token_ids = frozenset({tokenizer.eos_token_id})
        self.script = script
        self.fail = fail
        self.delay = delay
        self.eos = eos
        self.calls: list[tuple[list[int], int, Sampling]] = []
        self.adapters: list[str | None] = []
        self.yielded = 0
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def reply_ids(self, input_ids: list[int]) -> list[int]:
        if self.script is not None:
            text = self.script
        else:
            prompt = self.tokenizer.decode(input_ids)
            last = prompt.rsplit("<|im_start|>user\n", 1)[-1].split("<|im_end|>")[0]
            text = expected_text(last)
        return self.tokenizer.encode(text, add_special_tokens=False)

    def generate_ids(
        self,
        input_ids: list[int],
        *,
        max_new_tokens: int,
        sampling: Sampling,
        adapter: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[int]:
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            self.calls.append((list(input_ids), max_new_tokens, sampling))
            self.adapters.append(adapter)
        try:
            if self.fail:
                raise RuntimeError("out of memory")
            ids = self.reply_ids(input_ids) + ([self.tokenizer.eos_token_id] if self.eos else [])
            for token in ids[:max_new_tokens]:
                if cancelled is not None and cancelled():
                    return
                time.sleep(self.delay)
                with self._lock:
                    self.yielded += 1
                yield token
        finally:
            with self._lock:
                self.active -= 1

"""The model behind the server: a Protocol, prompt rendering through the cache, and
generation serialized one request at a time.

One model instance cannot generate for two requests at once, so `Generation.start`
runs each request in its own thread holding one lock; the reply is handed to the
event loop piece by piece through an `asyncio.Queue`. The thread always runs to
the end (bounded by `max_new_tokens`) and releases the lock even when the client
goes away.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from dlm.chat import with_system_prompt
from dlm.serve.tokcache import CachedTokenizer


class Engine(Protocol):
    """What the server needs from a loaded model (`dlm.infer.InferenceModel` is one).

    `generate` streams the reply as text pieces; `input_ids` (1-D list[int]) are the
    already tokenized prompt; greedy when `temperature == 0`.
    """

    tokenizer: Any
    model_id: str
    system_prompt: str | None

    def generate(
        self,
        messages: list[dict[str, Any]],
        *,
        max_new_tokens: int,
        temperature: float,
        input_ids: list[int] | None = None,
    ) -> Iterator[str]: ...


@dataclass(frozen=True)
class GenerationFailed:
    """Put on the queue when the engine raised; `message` is safe to show a client."""

    message: str


_END = object()


def max_model_len(engine: Engine) -> int | None:
    """Context length in tokens: the engine's `max_model_len`, else the model config's
    `max_position_embeddings`, else None."""
    explicit = getattr(engine, "max_model_len", None)
    if explicit:
        return int(explicit)
    config = getattr(getattr(engine, "model", None), "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


class Generation:
    """Renders prompts with the chat template, tokenizes them through `cached`, and
    runs the engine one request at a time."""

    def __init__(self, engine: Engine, cached: CachedTokenizer):
        self.engine = engine
        self.cached = cached
        self._lock = threading.Lock()

    def with_system_prompt(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Prepend the document's system prompt when the conversation has none."""
        return with_system_prompt(messages, self.engine.system_prompt)

    def prompt_ids(self, messages: list[dict[str, Any]], *, add_generation_prompt: bool = True) -> list[int]:
        """Prompt ids, 1-D list[int]: chat template, then the cache, no extra special tokens
        (the same ids `InferenceModel.render` gives)."""
        text = self.engine.tokenizer.apply_chat_template(
            self.with_system_prompt(messages), tokenize=False, add_generation_prompt=add_generation_prompt
        )
        return self.cached.encode(text, add_special_tokens=False)

    def count_tokens(self, text: str) -> int:
        """Tokens in generated text (plain tokenizer: replies are not worth caching)."""
        return len(self.engine.tokenizer.encode(text, add_special_tokens=False))

    async def stream(
        self, messages: list[dict[str, Any]], ids: list[int], *, max_new_tokens: int, temperature: float
    ) -> AsyncIterator[str | GenerationFailed]:
        """Reply pieces as they come; a `GenerationFailed` last when the engine raised."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Any] = asyncio.Queue()

        def emit(item: Any) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone (server shutting down)
                pass

        def work() -> None:
            with self._lock:
                try:
                    for piece in self.engine.generate(
                        self.with_system_prompt(messages),
                        max_new_tokens=max_new_tokens,
                        temperature=temperature,
                        input_ids=ids,
                    ):
                        emit(piece)
                except Exception as exc:  # reported to the client, not raised in a dead thread
                    emit(GenerationFailed(f"generation failed: {type(exc).__name__}: {exc}"))
                finally:
                    emit(_END)

        threading.Thread(target=work, name="dlm-generate", daemon=True).start()
        while (item := await queue.get()) is not _END:
            yield item

"""The model behind the server: a Protocol, prompt rendering through the cache, and
generation one request at a time behind a bounded wait queue.

One model instance cannot generate for two requests at once. A request is
`admit`ted (refused with `QueueFull` when `max_queue` requests already wait, or
`ShuttingDown`), waits its turn on the event loop (`Job.wait_turn`, which a
disconnected client or the start of shutdown ends), then its ids are generated on a
worker thread (`Job.start`) and handed to the event loop through an `asyncio.Queue`
as `Delta`s, then one `Done` (or `GenerationFailed`). `Job.cancel()` stops the worker within one
decoding step or one prefill chunk: the engine consults the flag between chunks of the
prompt and between ids (`dlm.infer.decode`). The turn passes to the next request
only when the worker has returned, so two generations never overlap.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from dlm.chat import with_system_prompt
from dlm.defaults import DEFAULT_MAX_QUEUE
from dlm.infer.decode import Sampling
from dlm.infer.textstream import TextStream
from dlm.serve.catalog import Catalog

FinishReason = Literal["stop", "length"]


class Engine(Protocol):
    """What the server needs from a loaded model (`dlm.infer.decode.TorchEngine` is one).

    `generate_ids` yields generated ids one per decoding step (at most
    `max_new_tokens`, the last one an id of `eos_token_ids` when the model ended the
    reply) with the peft adapter named `adapter` (None: the base model alone); a
    caller may stop iterating at any time, and the generator ends once `cancelled()`
    returns True, which it consults between prefill chunks and between ids.
    """

    tokenizer: Any
    eos_token_ids: frozenset[int]

    def generate_ids(
        self,
        input_ids: list[int],
        *,
        max_new_tokens: int,
        sampling: Sampling,
        adapter: str | None = None,
        cancelled: Callable[[], bool] | None = None,
    ) -> Iterator[int]: ...


@dataclass(frozen=True)
class Delta:
    """Newly released reply text."""

    text: str


@dataclass(frozen=True)
class Done:
    """The reply is complete. `finish_reason`: "length" exactly when `max_tokens` ended it;
    `completion_tokens`: ids generated (an ending EOS included)."""

    finish_reason: FinishReason
    completion_tokens: int


@dataclass(frozen=True)
class GenerationFailed:
    """The engine raised; `message` is safe to show a client."""

    message: str


Event = Delta | Done | GenerationFailed


class QueueFull(Exception):
    """`max_queue` requests already wait for the model."""


class ShuttingDown(Exception):
    """The server is stopping and takes no new generation."""


class Cancelled(Exception):
    """The request ended before its turn came (its client went away)."""


def max_model_len(engine: Any) -> int | None:
    """Context length in tokens: the engine's `max_model_len`, else the model config's
    `max_position_embeddings`, else None."""
    explicit = getattr(engine, "max_model_len", None)
    if explicit:
        return int(explicit)
    config = getattr(getattr(engine, "model", None), "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


@dataclass(frozen=True)
class Request:
    """One generation: the served model's id (`dlm.serve.catalog`), prompt ids (1-D
    list[int]), budget in tokens, sampling, stop strings."""

    model_id: str
    input_ids: list[int]
    max_new_tokens: int
    sampling: Sampling
    stop: tuple[str, ...] = ()


class Generation:
    """Renders prompts, and runs `engine` one request at a time with the adapter the
    request's model has in `catalog` when its turn comes.

    Args:
        max_queue: requests that may wait while one generates; more get `QueueFull`.
        on_event: called with what happened to a request (metrics hook; thread-safe:
            a generation's outcome is reported from its worker thread): "admitted"; refused: "queue_full", "shutting_down"; cancelled:
            "client_disconnected", "shutdown"; ended: "finished", "failed".
    """

    def __init__(
        self,
        engine: Engine,
        catalog: Catalog,
        *,
        max_queue: int = DEFAULT_MAX_QUEUE,
        on_event: Callable[[str], None] = lambda _: None,
    ):
        self.engine = engine
        self.catalog = catalog
        self.max_queue = max_queue
        self.on_event = on_event
        self.waiting = 0
        self.running = False
        self.shutting_down = False
        self._turn: asyncio.Lock | None = None
        self._closing: asyncio.Event | None = None
        self._jobs: set[Job] = set()

    def render(
        self, messages: list[dict[str, Any]], system_prompt: str | None, *, add_generation_prompt: bool = True
    ) -> str:
        """The conversation as prompt text under the chat template, `system_prompt`
        prepended when it has no system message."""
        return str(
            self.engine.tokenizer.apply_chat_template(
                with_system_prompt(messages, system_prompt),
                tokenize=False,
                add_generation_prompt=add_generation_prompt,
            )
        )

    def admit(self, request: Request) -> Job:
        """A job for `request`, counted as waiting until its turn.

        Raises:
            ShuttingDown: the server is stopping.
            QueueFull: `max_queue` requests already wait.
        """
        if self.shutting_down:
            self.on_event("shutting_down")
            raise ShuttingDown
        busy = self.running or self.waiting > 0
        if busy and self.waiting >= self.max_queue:
            self.on_event("queue_full")
            raise QueueFull
        self.waiting += 1
        self.on_event("admitted")
        return Job(self, request)

    def begin_shutdown(self) -> None:
        """Refuse new work and end every job still waiting (`ShuttingDown`); the one
        generating goes on until it ends or `cancel_all` (on the event loop)."""
        self.shutting_down = True
        self._closing_event().set()

    def cancel_all(self) -> None:
        """Cancel every job (the running one stops within one decoding step)."""
        for job in list(self._jobs):
            job.cancel("shutdown")

    def close(self, timeout: float) -> None:
        """Refuse new work, cancel every job and wait up to `timeout` seconds for the
        worker threads to return (thread-safe; used once the event loop has stopped, so
        the process never exits with a thread inside the model's forward pass)."""
        self.shutting_down = True
        jobs = list(self._jobs)
        for job in jobs:
            job.cancel("shutdown")
        deadline = time.monotonic() + timeout
        for job in jobs:
            job.join(max(deadline - time.monotonic(), 0.0))

    def _turn_lock(self) -> asyncio.Lock:
        if self._turn is None:
            self._turn = asyncio.Lock()
        return self._turn

    def _closing_event(self) -> asyncio.Event:
        if self._closing is None:
            self._closing = asyncio.Event()
        return self._closing


class Job:
    """One admitted request: `wait_turn`, `start`, then read `events()`; `cancel()` at any time."""

    def __init__(self, owner: Generation, request: Request):
        self.owner = owner
        self.request = request
        self._cancel = threading.Event()
        self._waiting = True
        self._holds_turn = False
        self._reason = ""
        self._queue: asyncio.Queue[Event | None] | None = None
        self._thread: threading.Thread | None = None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def cancel(self, reason: str = "client_disconnected") -> None:
        """Stop this job: a waiting job leaves the queue, a running one stops within one step."""
        if not self._cancel.is_set():
            self._reason = reason
            self._cancel.set()
            if self._waiting:
                self._leave_queue()

    def _leave_queue(self) -> None:
        if self._waiting:
            self._waiting = False
            self.owner.waiting -= 1

    async def wait_turn(self, disconnected: Callable[[], Any]) -> None:
        """Wait until the model is free for this job.

        Args:
            disconnected: returns an awaitable that completes when the client is gone.

        Raises:
            Cancelled: the client went away first (counted).
            ShuttingDown: the server began stopping first (counted).
        """
        owner = self.owner
        lock = owner._turn_lock()
        turn = asyncio.ensure_future(lock.acquire())
        gone = asyncio.ensure_future(disconnected())
        closing = asyncio.ensure_future(owner._closing_event().wait())
        try:
            await asyncio.wait({turn, gone, closing}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (gone, closing):
                task.cancel()
            if not turn.done():
                turn.cancel()
            self._leave_queue()
        got = turn.done() and not turn.cancelled() and turn.exception() is None
        if got and not gone.done() and not owner.shutting_down:
            self._holds_turn = True
            owner.running = True
            owner._jobs.add(self)
            return
        if got:
            lock.release()
        if owner.shutting_down and not gone.done():
            self.cancel("shutdown")
            owner.on_event("shutting_down")
            raise ShuttingDown
        self.cancel()
        owner.on_event("client_disconnected")
        raise Cancelled

    def start(self) -> None:
        """Run the engine on a worker thread (needs `wait_turn` first). The worker counts
        the outcome and hands the turn on when it returns, whether or not anyone reads
        `events()`: a reply nobody reads still ends when the job is cancelled."""
        if not self._holds_turn or self._queue is not None:
            raise RuntimeError("start() needs wait_turn() first, and runs once")
        owner = self.owner
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()
        self._queue = queue

        def emit(item: Event | None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, item)
            except RuntimeError:  # the event loop is gone (server stopped)
                pass

        def release() -> None:
            owner.running = False
            owner._jobs.discard(self)
            owner._turn_lock().release()

        def work() -> None:
            outcome = "failed"
            try:
                outcome = self._run(emit)
            finally:
                if outcome == "cancelled":
                    outcome = self._reason or ("shutdown" if owner.shutting_down else "client_disconnected")
                owner.on_event(outcome)  # here, not on the loop: it may have stopped already
                emit(None)
                try:
                    loop.call_soon_threadsafe(release)
                except RuntimeError:
                    pass

        self._thread = threading.Thread(target=work, name="dlm-generate", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the worker thread (if started) to return."""
        if self._thread is not None:
            self._thread.join(timeout)

    async def events(self) -> AsyncIterator[Event]:
        """The `Event`s of the started job; the last is a `Done` or `GenerationFailed`
        unless it was cancelled. Closing this iterator early cancels the job."""
        if self._queue is None:
            raise RuntimeError("events() before start()")
        ended = False
        try:
            while (item := await self._queue.get()) is not None:
                ended = isinstance(item, (Done, GenerationFailed))
                yield item
        finally:
            if not ended:  # the client went away or the server is stopping
                self.cancel("shutdown" if self.owner.shutting_down else "client_disconnected")

    def _run(self, emit: Callable[[Event | None], None]) -> str:
        """Generate and emit; the outcome: "finished", "failed" or "cancelled"."""
        with self.owner.catalog.serving(self.request.model_id) as served:
            return self._decode(served.adapter, emit)

    def _decode(self, adapter: str | None, emit: Callable[[Event | None], None]) -> str:
        engine, request = self.owner.engine, self.request
        text = TextStream(engine.tokenizer, request.stop, engine.eos_token_ids)
        ended_by_model = False
        ids = engine.generate_ids(
            request.input_ids,
            max_new_tokens=request.max_new_tokens,
            sampling=request.sampling,
            adapter=adapter,
            cancelled=self._cancel.is_set,
        )
        try:
            for token in ids:
                if self._cancel.is_set():
                    return "cancelled"
                step = text.push(token)
                if step.text:
                    emit(Delta(step.text))
                if step.stopped or token in engine.eos_token_ids:
                    ended_by_model = True
                    break
                if self._cancel.is_set():
                    return "cancelled"
        except Exception as exc:  # reported to the client, not raised in a dead thread
            emit(GenerationFailed(f"generation failed: {type(exc).__name__}: {exc}"))
            return "failed"
        finally:
            close = getattr(ids, "close", None)
            if close is not None:
                close()
        if self._cancel.is_set():  # the engine ended early: cancelled during prefill or a step
            return "cancelled"
        rest = text.finish()
        if rest:
            emit(Delta(rest))
        stopped = ended_by_model or text.n_ids < request.max_new_tokens
        emit(Done("stop" if stopped else "length", text.n_ids))
        return "finished"

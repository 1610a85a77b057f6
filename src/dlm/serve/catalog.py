"""What one server serves: a model per document, and the base model alone.

A request's `model` picks a `ServedModel` by its id (`dlm:<dlm_id>`, or the base
model's name), by the document's name (its file stem) or by its bare `dlm_id`; no
`model` picks the first document. Each document's entry names the peft adapter it
generates with and its adapter version; publishing a new version replaces the entry
(`replace`). Generation reads the entry under `serving()`, holding the catalog's
lock for the whole generation; a reload holds the same lock while it adds and deletes
adapters, so no generation ever sees an adapter half-loaded or deleted.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ServedModel:
    """One name clients can ask for.

    Attributes:
        id: the model id in replies and `/v1/models` (`dlm:<dlm_id>`, or the base name).
        system_prompt: added when a conversation has none.
        adapter: the peft adapter it generates with (None: the base model alone).
        name: the document's name (file stem), None for the base model.
        dlm_id: the document's id, None for the base model.
        adapter_version: the store version of `adapter` (e.g. "v0003").
        base: the base model's name (`root` of every card).
        path: the document's file, read again when a new adapter version is loaded
            (its system prompt goes with the adapter: `dlm.serve.reload`); None for
            the base model.
    """

    id: str
    system_prompt: str | None = None
    adapter: str | None = None
    name: str | None = None
    dlm_id: str | None = None
    adapter_version: str | None = None
    base: str | None = None
    path: Path | None = None

    def aliases(self) -> tuple[str, ...]:
        return tuple(a for a in (self.id, self.name, self.dlm_id) if a)

    def card(self, max_model_len: int | None) -> dict[str, Any]:
        """The `/v1/models` entry (OpenAI's fields, plus vLLM's `root`/`parent` and dlm's)."""
        return {
            "id": self.id,
            "object": "model",
            "created": 0,
            "owned_by": "dlm",
            "root": self.base or self.id,
            "parent": self.base if self.adapter is not None else None,
            "max_model_len": max_model_len,
            "name": self.name,
            "dlm_id": self.dlm_id,
            "adapter_version": self.adapter_version,
        }


class Catalog:
    """The served models, thread-safe (see module docstring).

    Raises:
        ValueError: no models, or two models answer to one name.
    """

    def __init__(self, models: Sequence[ServedModel]):
        if not models:
            raise ValueError("a catalog serves at least one model")
        self._models = {m.id: m for m in models}
        self._order = [m.id for m in models]
        self._lock = threading.RLock()
        self._check_aliases()

    @property
    def lock(self) -> threading.RLock:
        """Held by a generation for its whole run, and by reloads."""
        return self._lock

    def models(self) -> list[ServedModel]:
        """Every served model, in the order given."""
        return [self._models[i] for i in self._order]

    def resolve(self, requested: str | None) -> ServedModel | None:
        """The model `requested` names (None: the first), or None when none does."""
        if requested is None:
            return self._models[self._order[0]]
        for model in self.models():
            if requested in model.aliases():
                return model
        return None

    def get(self, model_id: str) -> ServedModel:
        """The current entry of `model_id` (raises KeyError when not served)."""
        return self._models[model_id]

    def replace(self, model: ServedModel) -> ServedModel:
        """Put `model` in place of the entry with its id; return the old entry."""
        with self._lock:
            old = self._models[model.id]
            self._models[model.id] = model
            return old

    @contextmanager
    def serving(self, model_id: str) -> Iterator[ServedModel]:
        """Hold the lock and give the current entry of `model_id`."""
        with self._lock:
            yield self._models[model_id]

    def _check_aliases(self) -> None:
        seen: dict[str, str] = {}
        for model in self.models():
            for alias in set(model.aliases()):
                if alias in seen and seen[alias] != model.id:
                    raise ValueError(f"two served models answer to {alias!r}: {seen[alias]} and {model.id}")
                seen[alias] = model.id

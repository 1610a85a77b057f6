"""The typed state one app's routes share (`ServeState`), and its FastAPI dependency."""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from dlm.serve.catalog import Catalog, ServedModel
from dlm.serve.generation import Engine, Generation
from dlm.serve.metrics import ServerMetrics
from dlm.serve.reload import ReloadStatus
from dlm.serve.tokcache import CachedTokenizer


@dataclass
class ServeState:
    """Everything the routes use.

    Attributes:
        engine: the loaded model. catalog: the models served over it.
        cached: the tokenizer cache (shared by every model: one base, one tokenizer).
        generation: the one-at-a-time runner. metrics: this app's Prometheus registry.
        max_model_len: context length in tokens (None: unknown, unchecked).
        reloads: what adapter reloading did (`dlm.serve.reload`; `/health`, `/metrics`).
    """

    engine: Engine
    catalog: Catalog
    cached: CachedTokenizer
    generation: Generation
    metrics: ServerMetrics
    max_model_len: int | None
    reloads: ReloadStatus = field(default_factory=ReloadStatus)

    def cards(self) -> list[dict[str, object]]:
        return [m.card(self.max_model_len) for m in self.catalog.models()]

    def card(self, model: ServedModel) -> dict[str, object]:
        return model.card(self.max_model_len)


def serve_state(request: Request) -> ServeState:
    """FastAPI dependency: the app's `ServeState`."""
    state: ServeState = request.app.state.serve
    return state

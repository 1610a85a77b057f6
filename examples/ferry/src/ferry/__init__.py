"""Ferry: a small task queue that carries jobs from producers to worker threads."""

from ferry.queue import Dock
from ferry.worker import Deckhand

__all__ = ["Dock", "Deckhand"]

"""Per-document store: adapters, manifest, metrics, cache and lock under one folder."""

from dlm.store.store import Store, open_store

__all__ = ["Store", "open_store"]

"""`CacheRunReport`: what the cache did in one `tokenize` call, and the problems it went on past."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from dlm.cache.remote import RemoteCounts

log = logging.getLogger("dlm.cache")


@dataclass
class CacheRunReport:
    """What the cache did in one `tokenize` call (rows, entries, stored bytes)."""

    run_id: str
    hits: int = 0
    misses: int = 0
    admitted: int = 0
    not_admitted: int = 0
    corrupt: int = 0
    evicted_entries: int = 0
    evicted_bytes: int = 0
    warnings: list[str] = field(default_factory=list)
    remote: tuple[RemoteCounts, RemoteCounts] | None = None  # (pulled, pushed) when a remote is set

    def warn(self, message: str) -> None:
        """A problem the run went on past: kept in `warnings`, which the caller renders
        once the call returns (not logged too: a CLI would print it twice)."""
        self.warnings.append(message)

    def bad_entry(self, message: str) -> None:
        """A damaged entry met while reading (counted in `corrupt`). Reads are lazy and
        may come after the caller rendered `warnings` (a training run reads as it
        trains), so this one is also logged to `dlm.cache`."""
        self.corrupt += 1
        self.warnings.append(message)
        log.warning(message)

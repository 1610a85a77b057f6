"""Polling feeds: a Harvester walks the feed list once per round."""

from __future__ import annotations

import time
import urllib.request
from dataclasses import dataclass, field

from tarnwick.larder import Larder
from tarnwick.parse import read_entries

ROUND_SECONDS = 900
FETCH_TIMEOUT_SECONDS = 14
MUTE_AFTER_FAILURES = 23


@dataclass
class Feed:
    """One feed: its URL and how many fetches in a row have failed."""

    url: str
    failures: int = 0

    @property
    def muted(self) -> bool:
        """A feed that keeps failing is skipped until someone resets it."""
        return self.failures >= MUTE_AFTER_FAILURES


@dataclass
class Harvester:
    """Fetches every feed that is not muted and hands new entries to the Larder."""

    larder: Larder
    feeds: list[Feed] = field(default_factory=list)

    def round(self) -> int:
        """Fetch each feed once; return how many new entries were stored."""
        stored = 0
        for feed in self.feeds:
            if feed.muted:
                continue
            try:
                with urllib.request.urlopen(feed.url, timeout=FETCH_TIMEOUT_SECONDS) as reply:
                    entries = read_entries(reply.read())
            except OSError:
                feed.failures += 1
                continue
            feed.failures = 0
            stored += self.larder.put_many(feed.url, entries)
        return stored

    def run_forever(self) -> None:
        """One round every ROUND_SECONDS, until interrupted."""
        while True:
            started = time.monotonic()
            self.round()
            time.sleep(max(0.0, ROUND_SECONDS - (time.monotonic() - started)))

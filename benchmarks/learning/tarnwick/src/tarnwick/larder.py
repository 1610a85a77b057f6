"""The Larder: harvested entries in one SQLite file, a bounded number per feed."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from tarnwick.parse import Entry

LARDER_FILE = "larder.sqlite3"
KEEP_PER_FEED = 240


class Larder:
    """Stores entries by feed and drops the oldest past KEEP_PER_FEED."""

    def __init__(self, folder: Path) -> None:
        self.db = sqlite3.connect(folder / LARDER_FILE)
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS entries (feed TEXT, entry_id TEXT, title TEXT, link TEXT,"
            " seen INTEGER DEFAULT (strftime('%s')), PRIMARY KEY (feed, entry_id))"
        )

    def put_many(self, feed: str, entries: Iterable[Entry]) -> int:
        """Store the entries not seen before; return how many were new."""
        before = self.db.total_changes
        self.db.executemany(
            "INSERT OR IGNORE INTO entries (feed, entry_id, title, link) VALUES (?, ?, ?, ?)",
            [(feed, e.entry_id, e.title, e.link) for e in entries],
        )
        self.db.execute(
            "DELETE FROM entries WHERE feed = ? AND entry_id NOT IN "
            "(SELECT entry_id FROM entries WHERE feed = ? ORDER BY seen DESC LIMIT ?)",
            (feed, feed, KEEP_PER_FEED),
        )
        self.db.commit()
        return self.db.total_changes - before

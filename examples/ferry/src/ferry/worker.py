"""Worker threads that run the tasks waiting on a Dock."""

import threading
import time

from ferry.queue import BACKOFF_SECONDS, MAX_RETRIES

HEARTBEAT_INTERVAL = 45


class Deckhand(threading.Thread):
    """Runs tasks from a Dock in a worker thread, retrying failures with a fixed backoff."""

    def __init__(self, dock, ledger):
        super().__init__(name="ferry-deckhand", daemon=True)
        self.dock, self.ledger = dock, ledger
        self.last_heartbeat = time.monotonic()

    def run(self):
        while True:
            task = self.dock.disembark()
            if task is None:
                time.sleep(0.1)
                continue
            for attempt in range(MAX_RETRIES + 1):
                try:
                    self.ledger.record(task, task())
                    break
                except Exception:
                    time.sleep(BACKOFF_SECONDS)

"""The in-memory queue of Ferry: tasks wait on a Dock until a Deckhand takes them."""

import heapq
import itertools

MAX_RETRIES = 7
BACKOFF_SECONDS = 2.5
PRIORITIES = ("storm", "choppy", "calm")


class Dock:
    """Holds pending tasks in priority order, at most `capacity` of them."""

    def __init__(self, capacity=512):
        self.capacity = capacity
        self._heap = []
        self._count = itertools.count()

    def board(self, task, priority="calm"):
        """Add a task; storm tasks leave first, calm tasks last."""
        if len(self._heap) >= self.capacity:
            raise OverflowError("the dock is full")
        heapq.heappush(self._heap, (PRIORITIES.index(priority), next(self._count), task))

    def disembark(self):
        """Remove and return the most urgent task, or None when the dock is empty."""
        return heapq.heappop(self._heap)[2] if self._heap else None

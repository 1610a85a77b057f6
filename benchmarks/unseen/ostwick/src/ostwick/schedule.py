"""Routes, departures and the service day."""

from dataclasses import dataclass
from datetime import time

# A service day starts at this time; a bus before it belongs to the day before.
SERVICE_DAY_STARTS = "04:30"
# Routes whose buses run on school days only.
SCHOOL_ROUTES = ("S1", "S4", "S7")


@dataclass(frozen=True)
class Route:
    """A numbered route and the stops it calls at, in order."""

    number: str
    stops: tuple[str, ...]


def next_departure(route: Route, stop: str, after: time) -> time | None:
    """The first departure of `route` from `stop` at or after `after`, or None when the day has none left."""
    raise NotImplementedError

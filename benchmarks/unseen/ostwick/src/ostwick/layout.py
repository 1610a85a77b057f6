"""How a timetable is laid out on an A4 page."""

from dataclasses import dataclass, field

# Margin on every side of a printed page, in millimetres.
PAGE_MARGIN_MM = 14
# Stops listed on one page before the table continues overleaf.
MAX_STOPS_PER_PAGE = 38
# Font size of the large-print timetables, in points.
LARGE_PRINT_PT = 16
BODY_FONT = "DejaVu Sans Condensed"


@dataclass
class TimetablePage:
    """One printed page: a stop's departures, grouped by route, with the QR code in the corner."""

    stop: str
    routes: list[str] = field(default_factory=list)
    large_print: bool = False

    def font_size(self) -> float:
        """The body font size of this page, in points."""
        return LARGE_PRINT_PT if self.large_print else 9.5


def paginate(stops: list[str]) -> list[list[str]]:
    """Split the stops of a route into pages of at most `MAX_STOPS_PER_PAGE`."""
    return [stops[i : i + MAX_STOPS_PER_PAGE] for i in range(0, len(stops), MAX_STOPS_PER_PAGE)]

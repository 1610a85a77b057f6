"""The general-ability guard's passages (placeholder until the full set lands)."""

from __future__ import annotations

_PASSAGES = [
    ("en-rainbow", "A rainbow forms when sunlight enters raindrops, bends, reflects off the back of each drop and "
     "bends again on the way out. Because each colour bends by a slightly different amount, white light spreads "
     "into a band of colours, with red on the outside of the arc and violet on the inside."),
    ("py-bsearch", "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n"
     "        mid = (lo + hi) // 2\n        if items[mid] == target:\n            return mid\n"
     "        if items[mid] < target:\n            lo = mid + 1\n        else:\n            hi = mid - 1\n"
     "    return -1\n"),
]


def load_general_set() -> list[tuple[str, str]]:
    """(id, text) of every passage, in a fixed order."""
    return list(_PASSAGES)

"""`training.budget`: how much training a run may spend, in tokens or in time."""

from __future__ import annotations

import re
from dataclasses import dataclass

_BUDGET = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(k|m|M|s|min|h)?\s*(tokens?)?\s*$")


@dataclass(frozen=True)
class Budget:
    """`tokens` processed, or `seconds` of training (exactly one is set)."""

    tokens: int | None = None
    seconds: float | None = None

    def as_tokens(self, tokens_per_second: float) -> int:
        return self.tokens if self.tokens is not None else int((self.seconds or 0) * tokens_per_second)


def parse_budget(text: str | int) -> Budget:
    """`60000`, `"60k"`, `"1.5M"` or `"60k tokens"` (tokens); `"90s"`, `"4min"`, `"1h"` (time).

    `m` alone is minutes; `M` is millions of tokens. A token count is whole after its
    unit (`1.5k` is 1500; `0.4` and `1.0005k` are refused, not truncated).

    Raises:
        ValueError: anything else (the schema turns it into a one-line field error).
    """
    if isinstance(text, int):
        if text <= 0:
            raise ValueError("a budget must be positive")
        return Budget(tokens=text)
    m = _BUDGET.match(str(text))
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a budget: write tokens (60000, 60k, 1.5M) or time (90s, 4m, 1h)")
    value, unit, word = float(m.group(1)), m.group(2), m.group(3)
    if unit in ("s", "min", "h") or (unit == "m" and not word):
        return Budget(seconds=value * {"s": 1, "m": 60, "min": 60, "h": 3600}[unit])
    tokens = value * {None: 1, "k": 1_000, "M": 1_000_000, "m": 1_000_000}[unit]
    if not tokens.is_integer():  # "0.4" would be 0 tokens once truncated
        raise ValueError(
            f"{text!r} is not a budget: {tokens:g} tokens is not a whole number; "
            "write tokens (60000, 60k, 1.5M) or time with its unit (90s, 4m, 1h)"
        )
    return Budget(tokens=int(tokens))


@dataclass(frozen=True)
class Every:
    """`training.checkpoint_every`: every `steps` optimizer steps or every `seconds` of
    training (exactly one is set)."""

    steps: int | None = None
    seconds: float | None = None


def parse_every(value: str | int) -> Every:
    """`200` (optimizer steps) or `"2m"`, `"90s"`, `"1h"` (time).

    Raises:
        ValueError: anything else (the schema turns it into a one-line field error).
    """
    if isinstance(value, int):
        if value <= 0:
            raise ValueError("a step count must be positive")
        return Every(steps=value)
    wrong = f"{value!r} is not a checkpoint interval: write optimizer steps (200) or time (90s, 2m, 1h)"
    try:
        parsed = parse_budget(value)
    except ValueError:
        raise ValueError(wrong) from None
    if parsed.seconds is None:
        raise ValueError(wrong)
    return Every(seconds=parsed.seconds)

"""Memo files: a value kept under a key that names every input it was computed from.

Several results are remembered between runs: the base model's held-out score
(`dlm.train.base_score`), the base model's side of an evaluation and whole evaluation
reports (`dlm.judge.memo`). Each is one canonical JSON file

    {"format": N, "key": "sha256:<hex>", <the value's fields>...}

written atomically (`dlm.atomic`). A read returns the fields only when the format and
the key match; a missing, unreadable or damaged file, another format or another key is
a miss (None), never an error: the caller computes the value again and rewrites it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dlm.atomic import atomic_write_json


def read_keyed(path: Path, fmt: int, key: str) -> dict[str, Any] | None:
    """The fields stored at `path` under format `fmt` and `key` (the file's whole JSON
    object, `format` and `key` included), or None on any miss (module docstring)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("format") != fmt or data.get("key") != key:
        return None
    return data


def write_keyed(path: Path, fmt: int, key: str, fields: dict[str, Any]) -> None:
    """Replace `path` with `fields` under format `fmt` and `key` (atomic, canonical JSON).

    Raises:
        OSError: the folder cannot be written.
        TypeError: a value JSON cannot hold.
    """
    atomic_write_json(path, {**fields, "format": fmt, "key": key})

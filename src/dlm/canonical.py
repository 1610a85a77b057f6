"""Canonical JSON: the one serialization `dlm` hashes and writes.

Two forms of the same rules (keys sorted, UTF-8 kept as is, no NaN games):
- `canonical_json`: two-space indent and a trailing newline, for files people read
  (`dlm.lock`, manifests, golden records); the same value always gives the same bytes.
- `canonical_sha256`: `sha256:<hex>` over the compact form (`,` and `:` separators),
  for identities: the tokenizer fingerprint, the lock's hyperparameters hash, the
  golden tuple hash. Changing this function changes every such identity.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any


def canonical_json(obj: Any) -> str:
    """Canonical JSON text: sorted keys, two-space indent, UTF-8, trailing newline.

    Raises:
        TypeError: a value JSON cannot hold.
    """
    return json.dumps(obj, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def canonical_sha256(obj: Any, *, default: Callable[[Any], Any] | None = None) -> str:
    """`sha256:<64 hex>` of `obj` as compact canonical JSON, UTF-8 encoded.

    Args:
        obj: a JSON value (dicts, lists, str, numbers, bool, None).
        default: turns other values into JSON ones (as `json.dumps(default=...)`).

    Raises:
        TypeError: a value JSON cannot hold and `default` does not convert.
    """
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=default)
    return "sha256:" + hashlib.sha256(blob.encode("utf-8")).hexdigest()

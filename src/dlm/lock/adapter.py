"""A byte-stable adapter folder and its hash.

peft's `save_pretrained` writes `adapter_config.json` with `target_modules` in set
iteration order (which follows `PYTHONHASHSEED`, so it changes from process to process)
and the base model's absolute path; its model card `README.md` repeats that path.
`canonicalize_adapter_dir` rewrites both so two runs on the same inputs leave the same
bytes on disk:

- `adapter_config.json`: canonical JSON (`dlm.atomic.canonical_json`: sorted keys, two-space
  indent, trailing newline); the lists in `SET_VALUED_KEYS` sorted; every absolute path
  replaced (`base_model_name_or_path` by the base model's name, others by their last part).
- `README.md`: each absolute path found in the config replaced the same way.

`adapter_sha256` hashes the whole folder (format `ADAPTER_HASH_FORMAT`):

    sha256( "dlm-adapter-v1\\0"
            + for each regular file, by sorted relative POSIX path:
                  path (UTF-8) + "\\0" + size (8-byte big-endian) + bytes )

Sizes frame the contents, so moving bytes from one file to the next changes the hash.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from dlm.atomic import atomic_write_json, atomic_write_text

ADAPTER_HASH_FORMAT = "dlm-adapter-v1"
ADAPTER_CONFIG = "adapter_config.json"
MODEL_CARD = "README.md"
SET_VALUED_KEYS = ("target_modules", "modules_to_save", "exclude_modules")


def canonicalize_adapter_dir(adapter_dir: Path, *, base_model_name: str | None = None) -> None:
    """Rewrite `adapter_dir/adapter_config.json` (and the model card) canonically, in place.

    Args:
        adapter_dir: a folder written by peft's `save_pretrained`.
        base_model_name: what `base_model_name_or_path` becomes when it is an absolute path
            (e.g. `smollm2-135m`); None keeps the path's last part.

    Raises:
        FileNotFoundError: `adapter_dir` has no `adapter_config.json`.
        ValueError: `adapter_config.json` is not a JSON object.
    """
    adapter_dir = Path(adapter_dir)
    config_path = adapter_dir / ADAPTER_CONFIG
    config = json.loads(config_path.read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise ValueError(f"{config_path}: expected a JSON object")
    replacements: dict[str, str] = {}
    canonical = _canonical_config(config, base_model_name, replacements)
    atomic_write_json(config_path, canonical)
    card = adapter_dir / MODEL_CARD
    if replacements and card.is_file():
        text = card.read_text(encoding="utf-8")
        fixed = text
        for old in sorted(replacements, key=len, reverse=True):  # longest first: no partial hits
            fixed = fixed.replace(old, replacements[old])
        if fixed != text:
            atomic_write_text(card, fixed)


def _canonical_config(
    config: dict[str, Any], base_model_name: str | None, replacements: dict[str, str]
) -> dict[str, Any]:
    out = dict(config)
    for key in SET_VALUED_KEYS:
        value = out.get(key)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            out[key] = sorted(set(value))
    base = out.get("base_model_name_or_path")
    if isinstance(base, str) and _is_absolute(base):
        replacements[base] = base_model_name or _last_part(base)
    return _scrub_paths(out, replacements)


def _scrub_paths(value: Any, replacements: dict[str, str]) -> Any:
    if isinstance(value, dict):
        return {k: _scrub_paths(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_paths(v, replacements) for v in value]
    if isinstance(value, str) and _is_absolute(value):
        return replacements.setdefault(value, _last_part(value))
    return value


def _is_absolute(text: str) -> bool:
    return PurePosixPath(text).is_absolute() or PureWindowsPath(text).is_absolute()


def _last_part(text: str) -> str:
    name = PureWindowsPath(text).name if "\\" in text else PurePosixPath(text).name
    return name or text


def adapter_sha256(adapter_dir: Path) -> str:
    """`sha256:<hex>` over every regular file under `adapter_dir` (module docstring).

    Raises:
        FileNotFoundError: `adapter_dir` does not exist or holds no files.
    """
    root = Path(adapter_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such adapter folder")
    files = sorted(
        (PurePosixPath(p.relative_to(root).as_posix()).as_posix(), p) for p in root.rglob("*") if p.is_file()
    )
    if not files:
        raise FileNotFoundError(f"{root}: adapter folder is empty")
    digest = hashlib.sha256(ADAPTER_HASH_FORMAT.encode() + b"\0")
    for rel, path in files:
        digest.update(rel.encode("utf-8") + b"\0")
        digest.update(os.stat(path).st_size.to_bytes(8, "big"))
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()

"""A hand-edited export whose self-declared checksum still matches is refused in one
line before any data is read: never an unexpected error, never a huge allocation."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
import xxhash
from cachehelp import FAKE_SHA, FakeTokenizer, row_set

from dlm.cache import CachedRowEncoder, export_cache, import_cache
from dlm.errors import CacheError


def members_of(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers()}


def write_tar(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w") as tar:
        for name, blob in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(blob)
            tar.addfile(info, io.BytesIO(blob))
    return path


@pytest.fixture
def export(tree: Path, cache_dir: Path, tmp_path: Path) -> dict[str, bytes]:
    CachedRowEncoder(cache_dir, FakeTokenizer(), FAKE_SHA, max_bytes=1 << 30, run_id="r").tokenize(row_set(tree))
    export_cache(cache_dir, tmp_path / "x.tar")
    return members_of(tmp_path / "x.tar")


def edited(members: dict[str, bytes], manifest=None, line=None) -> dict[str, bytes]:
    """The export with its manifest replaced, or entry line 0 edited by `line`, and the
    manifest's entries checksum made to match again."""
    out = dict(members)
    lines = [json.loads(x) for x in members["entries.jsonl"].splitlines()]
    if line is not None:
        lines[0] = line(dict(lines[0]))
        out["entries.jsonl"] = ("\n".join(json.dumps(x) for x in lines) + "\n").encode()
    real = json.loads(members["manifest.json"])
    real["entries_xxh3_64"] = xxhash.xxh3_64_hexdigest(out["entries.jsonl"])
    out["manifest.json"] = json.dumps(real if manifest is None else manifest(real)).encode()
    return out


def without(key):
    return lambda e: {k: v for k, v in e.items() if k != key}


def setting(key, value):
    return lambda e: {**e, key: value}


EDITS = {
    "list manifest": dict(manifest=lambda m: [m]),
    "int tokenizers": dict(manifest=lambda m: {**m, "tokenizers": 7}),
    "string entry count": dict(manifest=lambda m: {**m, "entries": "40"}),
    "missing offset": dict(line=without("offset")),
    "string nbytes": dict(line=setting("nbytes", "12")),
    "null key": dict(line=setting("key", None)),
    "nbytes 1e15": dict(line=setting("nbytes", 10**15)),
    "float nbytes": dict(line=setting("nbytes", 1e15)),
    "int tokenizer": dict(line=setting("tokenizer", 3)),
    "dtype 3": dict(line=setting("dtype", 3)),
    "negative offset": dict(line=setting("offset", -5)),
    "overlapping": dict(line=setting("offset", 1)),
    "a list line": dict(line=lambda e: [e]),
}


@pytest.mark.parametrize("edit", EDITS)
def test_a_hand_edited_export_is_refused_in_one_line(export, cache_dir: Path, tmp_path: Path, edit: str):
    path = write_tar(tmp_path / "edited.tar", edited(export, **EDITS[edit]))
    with pytest.raises(CacheError) as err:
        import_cache(tmp_path / "other-store", path, FAKE_SHA, max_bytes=1 << 30)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_an_unedited_export_still_imports(export, tmp_path: Path):
    path = write_tar(tmp_path / "same.tar", edited(export))
    got = import_cache(tmp_path / "other-store", path, FAKE_SHA, max_bytes=1 << 30)
    assert got.entries_imported == len(export["entries.jsonl"].splitlines()) and got.corrupt_skipped == 0

"""The remote's objects and how they are reached: the object codec and the store.

Layout under the remote URL (every object immutable, named by the sha256 of its bytes):

    packs/<sha256>.pack    entry payloads back to back, each exactly as stored locally
                           (one zstd frame of little-endian uint16|uint32 ids)
    index/<sha256>.idx     one zstd frame: b"DLMRIDX1", u32 header length, header JSON
                           {"pack": <sha256>, "pack_bytes": B, "tokenizers": [sha...], "n": n},
                           then n-long arrays: key u8[n,16], tokenizer u16 (position in
                           "tokenizers"), offset u64, nbytes u32, ntokens u32, n_prompt u32,
                           dtype u8, checksum i64 (xxh3_64 of the payload, as locally)

`RemoteStore` reaches them through fsspec; every call, opening the file system
included (ftp, hdfs and sftp connect when they are made), runs under a deadline
(`remote_timeout_s`: `$DLM_CACHE_REMOTE_TIMEOUT`, default `REMOTE_TIMEOUT_S`) and any
failure is `RemoteUnavailable`. `dlm.cache.remote` (the tier) builds on this module.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import zstandard

from dlm.errors import CacheError

IDX_MAGIC = b"DLMRIDX1"
PACK_BYTES = 16 << 20
FETCH_BATCH = 8
REMOTE_TIMEOUT_S = 30.0  # default deadline of one remote call; `DLM_CACHE_REMOTE_TIMEOUT` sets another
MAX_REMOTE_TIMEOUT_S = 86400.0
INDEX_FIELDS = (
    ("offset", "<u8"),
    ("nbytes", "<u4"),
    ("ntokens", "<u4"),
    ("n_prompt", "<u4"),
    ("dtype", "u1"),
    ("checksum", "<i8"),
)
T = TypeVar("T")


class RemoteUnavailable(CacheError):
    """The remote did not answer within the deadline, or failed."""


def resolve_remote(setting: str | None, override: str | None = None, base_dir: Path | None = None) -> str | None:
    """The remote URL of a run: `override` (`--cache-remote`), else `$DLM_CACHE_REMOTE`,
    else `setting` (`training.cache.remote`, a relative folder resolved against
    `base_dir`). An empty string turns the remote off."""
    url = override if override is not None else os.environ.get("DLM_CACHE_REMOTE", setting)
    if not url:
        return None
    if "://" not in url and base_dir is not None and not os.path.isabs(os.path.expanduser(url)):
        return str(base_dir / url)
    return os.path.expanduser(url) if "://" not in url else url


def remote_timeout_s() -> float:
    """The deadline of one remote call in seconds: `$DLM_CACHE_REMOTE_TIMEOUT`, else
    `REMOTE_TIMEOUT_S`. Read when a remote is first used, so a bad value breaks no run
    that has no remote.

    Raises:
        CacheError: the variable is not a number of seconds in (0, 86400].
    """
    raw = os.environ.get("DLM_CACHE_REMOTE_TIMEOUT", "").strip()
    if not raw:
        return REMOTE_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 < value <= MAX_REMOTE_TIMEOUT_S):
        raise CacheError(
            f"DLM_CACHE_REMOTE_TIMEOUT={raw!r}: should be a number of seconds above 0 and at most "
            f"{MAX_REMOTE_TIMEOUT_S:g} (default {REMOTE_TIMEOUT_S:g}); fix or unset it"
        )
    return value


def bounded(fn: Callable[[], T], timeout_s: float, what: str) -> T:
    """Run `fn` in a daemon thread and wait at most `timeout_s` seconds.

    Raises:
        RemoteUnavailable: it timed out or raised (the thread is abandoned).
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc

    worker = threading.Thread(target=target, name="dlm-cache-remote", daemon=True)
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise RemoteUnavailable(f"{what}: no answer within {timeout_s:g} s")
    if "error" in box:
        exc = box["error"]
        if isinstance(exc, RemoteUnavailable):
            raise exc
        raise RemoteUnavailable(f"{what}: {type(exc).__name__}: {exc}")
    return box["value"]


class RemoteStore:
    """Objects under one remote URL, through fsspec (see module docstring)."""

    def __init__(self, url: str, timeout_s: float | None = None) -> None:
        """Open the file system of `url` under the deadline: many fsspec file systems
        (ftp, hdfs, sftp, github) connect when they are made.

        Raises:
            RemoteUnavailable: the file system cannot be made (refused, silent past
                the deadline, an unknown protocol, a missing driver).
            CacheError: `DLM_CACHE_REMOTE_TIMEOUT` is not a valid number of seconds.
        """
        timeout_s = remote_timeout_s() if timeout_s is None else timeout_s
        self.url, self.timeout_s = url, timeout_s
        options: dict[str, Any] = {}
        if url.startswith(("s3://", "s3a://")):
            options = {
                "config_kwargs": {
                    "connect_timeout": min(timeout_s, 10),
                    "read_timeout": timeout_s,
                    "retries": {"max_attempts": 2},
                },
                "skip_instance_cache": True,
            }

        def open_fs() -> tuple[Any, str]:
            import fsspec

            try:
                return fsspec.core.url_to_fs(url, **options)
            except ImportError as exc:
                raise RemoteUnavailable(f"{url}: cannot open this remote ({exc}); for s3:// install dlm[s3]") from None

        self.fs, self.root = bounded(open_fs, timeout_s, f"{url}: opening the remote")
        self.root = self.root.rstrip("/")
        self.local = "file" in (self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,))

    def _path(self, name: str) -> str:
        return f"{self.root}/{name}"

    def list_indexes(self) -> dict[str, int]:
        """Index object name -> size in bytes (-1 when the remote does not say), by name."""

        def run() -> dict[str, int]:
            try:
                found = self.fs.ls(self._path("index"), detail=True)
            except FileNotFoundError:
                return {}
            sizes = {str(info["name"]).rstrip("/").rsplit("/", 1)[-1]: info.get("size") for info in found}
            return {
                name: int(size) if isinstance(size, int) else -1
                for name, size in sorted(sizes.items())
                if name.endswith(".idx")
            }

        return bounded(run, self.timeout_s, f"{self.url}: listing index/")

    def fetch(self, names: list[str]) -> dict[str, bytes | None]:
        """name -> bytes (None: missing or unreadable), fetched concurrently where fsspec can."""
        paths = [self._path(n) for n in names]

        def run() -> dict[str, bytes | None]:
            got = self.fs.cat(paths, on_error="return") if paths else {}
            by_base = {str(k).rstrip("/").rsplit("/", 1)[-1]: v for k, v in got.items()}
            return {
                n: (v if isinstance(v, bytes) else None)
                for n, v in zip(names, (by_base.get(n.rsplit("/", 1)[-1]) for n in names), strict=False)
            }

        return bounded(run, self.timeout_s * max(1, len(names) // FETCH_BATCH), f"{self.url}: fetching")

    def put(self, name: str, data: bytes) -> None:
        """Write one immutable object (skipped when it exists: same name, same bytes)."""
        path = self._path(name)

        def run() -> None:
            if self.fs.exists(path):
                return
            self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            if self.local:  # a reader must never see a half-written file
                tmp = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
                self.fs.pipe_file(tmp, data)
                os.replace(tmp, path)
            else:
                self.fs.pipe_file(path, data)

        bounded(run, self.timeout_s + len(data) / (1 << 20), f"{self.url}: writing {name}")


# index objects -------------------------------------------------------------------


@dataclass
class PackIndex:
    pack: str
    pack_bytes: int
    tokenizers: list[str]
    keys: np.ndarray  # u8 [n, 16]
    tok: np.ndarray  # u16 [n]
    cols: dict[str, np.ndarray]


def encode_index(index: PackIndex) -> bytes:
    header = json.dumps(
        {
            "pack": index.pack,
            "pack_bytes": index.pack_bytes,
            "tokenizers": index.tokenizers,
            "n": int(index.keys.shape[0]),
        },
        sort_keys=True,
    ).encode()
    parts = [
        IDX_MAGIC,
        np.array([len(header)], "<u4").tobytes(),
        header,
        index.keys.astype("u1").tobytes(),
        index.tok.astype("<u2").tobytes(),
    ]
    parts += [index.cols[name].astype(dt).tobytes() for name, dt in INDEX_FIELDS]
    return zstandard.ZstdCompressor(level=3).compress(b"".join(parts))


def decode_index(blob: bytes) -> PackIndex | None:
    """The index in an object's bytes, or None when it is not one (damaged, foreign)."""
    try:
        raw = zstandard.ZstdDecompressor().decompress(blob, max_output_size=1 << 30)
        if raw[:8] != IDX_MAGIC:
            return None
        hlen = int(np.frombuffer(raw, "<u4", 1, 8)[0])
        header = json.loads(raw[12 : 12 + hlen])
        n, off = int(header["n"]), 12 + hlen
        if len(raw) != off + n * (16 + 2 + 8 + 4 + 4 + 4 + 1 + 8):
            return None
        keys = np.frombuffer(raw, "u1", n * 16, off).reshape(n, 16)
        off += n * 16
        tok = np.frombuffer(raw, "<u2", n, off)
        off += n * 2
        cols = {}
        for name, dt in INDEX_FIELDS:
            cols[name] = np.frombuffer(raw, dt, n, off).astype(np.int64)
            off += n * np.dtype(dt).itemsize
        if n and int(tok.max()) >= len(header["tokenizers"]):
            return None
        return PackIndex(str(header["pack"]), int(header["pack_bytes"]), list(header["tokenizers"]), keys, tok, cols)
    except (zstandard.ZstdError, ValueError, KeyError, TypeError, json.JSONDecodeError):
        return None


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

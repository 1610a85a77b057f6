"""One portable file holding a cache's entries: `dlm cache export` / `dlm cache import`.

Format: an uncompressed POSIX tar (entries are already zstd frames) with

    manifest.json    {"format": "dlm-tokenized-cache", "version": 1,
                      "tokenizers": [sha256:...], "entries": N, "data_bytes": B,
                      "entries_xxh3_64": "<hex of entries.jsonl>"}
    entries.jsonl    one JSON object a line, in data order: key, tokenizer, offset,
                     nbytes, ntokens, n_prompt, dtype (2|4), checksum (xxh3_64, signed)
    data.bin         the stored bytes of every entry, back to back

Import validates the shapes of the manifest and of every entry line (types, bounds,
entries back to back inside `data.bin`) before it reads any data: a hand-edited
export whose checksums still match is refused in one line. Import then trusts the
pairing of each key with its bytes, as a pull does (docs/cache.md, "Trust"): an entry's
checksum proves its bytes are intact, not that they are the ids of the text its key
names; import only files you or your own jobs made.

Only entries travel: the stat index names paths of one machine, so after an import
the next run re-reads each source file once (hashing it) but encodes none whose text
is unchanged. Import refuses a file whose tokenizers do not include the document's
tokenizer fingerprint and verifies every entry's checksum and length; a bad entry is
skipped and counted, never admitted. Export writes a temporary file in the
destination folder, fsyncs it and renames it into place (streamed, so a cache larger
than memory can be exported; same guarantee as `dlm.atomic`).
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import xxhash
import zstandard
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from dlm.atomic import atomic_writer
from dlm.cache.evict import EVICT_TO_FRACTION, compact, evict_lru, maint_lock
from dlm.cache.index import insert_entries, meta_check, totals
from dlm.cache.schema import connect, key_text, tokenizer_id, write_tx
from dlm.cache.segments import SegmentReader, SegmentWriter, unpack_ids
from dlm.canonical import canonical_json
from dlm.errors import CacheError

FORMAT = "dlm-tokenized-cache"
FORMAT_VERSION = 1
IMPORT_BATCH_BYTES = 4 << 20
MAX_ENTRY_BYTES = 1 << 31  # one stored entry: a zstd frame of at most a 1 GiB row's ids
U32 = Annotated[int, Field(ge=0, lt=1 << 32)]
I64 = Annotated[int, Field(ge=-(1 << 63), lt=1 << 63)]


class _Shape(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Manifest(_Shape):
    """`manifest.json` (module docstring)."""

    format: Literal["dlm-tokenized-cache"]
    version: Literal[1]
    tokenizers: list[Annotated[str, Field(pattern=r"^sha256:[0-9a-f]{64}$")]]
    entries: Annotated[int, Field(ge=0)]
    data_bytes: Annotated[int, Field(ge=0)]
    entries_xxh3_64: Annotated[str, Field(pattern=r"^[0-9a-f]{16}$")]


class Entry(_Shape):
    """One line of `entries.jsonl`: where its stored bytes lie in `data.bin` and what
    they decode to."""

    key: Annotated[str, Field(pattern=r"^xxh3_128:[0-9a-f]{32}$")]
    tokenizer: str
    offset: Annotated[int, Field(ge=0)]
    nbytes: Annotated[int, Field(gt=0, le=MAX_ENTRY_BYTES)]
    ntokens: U32
    n_prompt: U32
    dtype: Literal[2, 4]
    checksum: I64


_ENTRIES = TypeAdapter(list[Entry])


@dataclass(frozen=True)
class ExportResult:
    path: str
    entries: int
    bytes: int
    corrupt_skipped: int


@dataclass(frozen=True)
class ImportResult:
    entries_imported: int
    already_present: int
    corrupt_skipped: int
    other_tokenizer_skipped: int
    bytes: int


def export_cache(store_dir: Path, dest: Path) -> ExportResult:
    """Write every verified entry of the cache to `dest` (see module docstring).

    Raises:
        CacheError: no cache, or `dest` cannot be written.
    """
    store_dir, dest = Path(store_dir), Path(dest)
    conn = connect(store_dir)
    try:
        rows = conn.execute(
            "SELECT e.key, t.sha, e.segment, s.name, e.offset, e.nbytes, e.ntokens, e.n_prompt,"
            " e.dtype, e.checksum FROM entries e JOIN tokenizers t ON t.id = e.tok"
            " JOIN segments s ON s.id = e.segment ORDER BY e.segment, e.offset"
        ).fetchall()
    finally:
        conn.close()
    reader = SegmentReader(store_dir)
    lines, shas, corrupt, pos = [], set(), 0, 0
    data_tmp: str | None = None
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        fd, data_tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.data.", suffix=".tmp")
        with os.fdopen(fd, "wb") as data:
            for key, sha, seg, name, off, nb, nt, npr, dt, ck in rows:
                if not reader.open(seg, name) or reader.read(seg, off, nb, nt, dt, ck) is None:
                    corrupt += 1
                    continue
                data.write(os.pread(reader.fds[seg], nb, off))
                lines.append(
                    json.dumps(
                        {
                            "key": key_text(key),
                            "tokenizer": sha,
                            "offset": pos,
                            "nbytes": nb,
                            "ntokens": nt,
                            "n_prompt": npr,
                            "dtype": dt,
                            "checksum": ck,
                        },
                        sort_keys=True,
                    )
                )
                shas.add(sha)
                pos += nb
        reader.close()
        jsonl = ("\n".join(lines) + "\n" if lines else "").encode()
        manifest = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "tokenizers": sorted(shas),
            "entries": len(lines),
            "data_bytes": pos,
            "entries_xxh3_64": xxhash.xxh3_64_hexdigest(jsonl),
        }
        _write_tar(dest, canonical_json(manifest).encode(), jsonl, Path(data_tmp))
    except OSError as exc:
        raise CacheError(f"{dest}: cannot write the export ({exc.strerror or exc}); choose a writable path") from None
    finally:
        reader.close()
        if data_tmp is not None:
            Path(data_tmp).unlink(missing_ok=True)
    return ExportResult(str(dest), len(lines), dest.stat().st_size, corrupt)


def _write_tar(dest: Path, manifest: bytes, jsonl: bytes, data_path: Path) -> None:
    with atomic_writer(dest) as fh, tarfile.open(fileobj=fh, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, blob in (("manifest.json", manifest), ("entries.jsonl", jsonl)):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(blob), int(time.time())
            tar.addfile(info, io.BytesIO(blob))
        tar.add(str(data_path), arcname="data.bin")


def _member(tar: tarfile.TarFile, name: str, src: Path) -> Any:
    try:
        fh = tar.extractfile(name)
    except KeyError:
        fh = None
    if fh is None:
        raise CacheError(f"{src}: not a dlm cache export (no {name}); export it with `dlm cache export`")
    return fh


def import_cache(store_dir: Path, src: Path, tokenizer_sha256: str, *, max_bytes: int) -> ImportResult:
    """Admit the entries of an export made for tokenizer `tokenizer_sha256`.

    Raises:
        CacheError: `src` is not an export, has another format version, or was made
            with other tokenizers only.
    """
    store_dir, src = Path(store_dir), Path(src)
    try:
        with tarfile.open(src, mode="r:") as tar:
            return _import_from(tar, store_dir, src, tokenizer_sha256, max_bytes)
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise CacheError(f"{src}: cannot read the cache export ({exc})") from None


def _import_from(
    tar: tarfile.TarFile, store_dir: Path, src: Path, tokenizer_sha256: str, max_bytes: int
) -> ImportResult:
    raw = json.loads(_member(tar, "manifest.json", src).read())
    if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("version") != FORMAT_VERSION:
        what = f"{raw.get('format')!r} v{raw.get('version')}" if isinstance(raw, dict) else "(not a JSON object)"
        raise CacheError(f"{src}: unsupported cache export format {what}")
    manifest = _valid(src, "manifest.json", lambda: Manifest.model_validate(raw))
    if tokenizer_sha256 not in manifest.tokenizers:
        raise CacheError(
            f"{src}: exported for tokenizer(s) {', '.join(manifest.tokenizers) or 'none'}, "
            f"but this document's tokenizer is {tokenizer_sha256}; its ids would be wrong here"
        )
    jsonl = _member(tar, "entries.jsonl", src).read()
    if xxhash.xxh3_64_hexdigest(jsonl) != manifest.entries_xxh3_64:
        raise CacheError(f"{src}: entries.jsonl fails its checksum; the export is damaged")
    lines = [json.loads(line) for line in jsonl.splitlines() if line.strip()]
    entries = _valid(src, "entries.jsonl", lambda: _ENTRIES.validate_python(lines))
    data_info = tar.getmember("data.bin") if "data.bin" in tar.getnames() else None
    _check_layout(src, entries, manifest, data_info.size if data_info is not None else 0)
    return _admit(
        store_dir, _member(tar, "data.bin", src), [e.model_dump() for e in entries], tokenizer_sha256, max_bytes
    )


def _valid(src: Path, member: str, parse: Any) -> Any:
    """`parse()`, or a CacheError naming the first bad field (`entries.jsonl` line N)."""
    try:
        return parse()
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = list(first["loc"])
        where = f"line {int(loc.pop(0)) + 1}" if member == "entries.jsonl" and loc and isinstance(loc[0], int) else ""
        field = ".".join(str(p) for p in loc) or "(the whole value)"
        raise CacheError(
            f"{src}: not a valid dlm cache export: {member} {where + ' ' if where else ''}{field}: {first['msg']}; "
            "export it again with `dlm cache export`"
        ) from None


def _check_layout(src: Path, entries: list[Entry], manifest: Manifest, data_size: int) -> None:
    """Entries lie back to back inside `data.bin`, whose size the manifest states."""
    if manifest.entries != len(entries) or manifest.data_bytes != data_size:
        raise CacheError(
            f"{src}: not a valid dlm cache export: the manifest counts {manifest.entries} entries "
            f"and {manifest.data_bytes} data bytes, the file holds {len(entries)} and {data_size}; "
            "export it again with `dlm cache export`"
        )
    end = 0
    for entry in sorted(entries, key=lambda e: e.offset):
        if entry.offset < end or entry.offset + entry.nbytes > data_size:
            raise CacheError(
                f"{src}: not a valid dlm cache export: entry {entry.key} at offset {entry.offset} "
                f"({entry.nbytes} bytes) overlaps another or lies past data.bin's {data_size} bytes; "
                "export it again with `dlm cache export`"
            )
        end = entry.offset + entry.nbytes


def _admit(store_dir: Path, data: Any, entries: list[dict], sha: str, max_bytes: int) -> ImportResult:
    conn = connect(store_dir)
    tok = tokenizer_id(conn, sha)
    writer = SegmentWriter(store_dir, conn)
    dctx = zstandard.ZstdDecompressor()
    present = {key_text(k) for (k,) in conn.execute("SELECT key FROM entries")}
    imported = dup = bad = other = 0
    batch: list[tuple[dict, bytes]] = []
    pos = 0
    try:
        for entry in sorted(entries, key=lambda e: e["offset"]):
            if entry["offset"] != pos:
                data.read(entry["offset"] - pos)
                pos = entry["offset"]
            blob = data.read(entry["nbytes"])
            pos += len(blob)
            if entry["tokenizer"] != sha:
                other += 1
            elif entry["key"] in present:
                dup += 1
            elif (
                len(blob) != entry["nbytes"]
                or unpack_ids(blob, entry["ntokens"], entry["dtype"], entry["checksum"], dctx) is None
            ):
                bad += 1
            else:
                batch.append((entry, blob))
                present.add(entry["key"])
                if sum(len(b) for _, b in batch) >= IMPORT_BATCH_BYTES:
                    imported += _write(conn, writer, tok, batch)
                    batch = []
        imported += _write(conn, writer, tok, batch)
    finally:
        writer.close()
    if totals(conn)[0] > max_bytes:
        with maint_lock(store_dir):
            evict_lru(conn, int(max_bytes * EVICT_TO_FRACTION), ())
            compact(conn, store_dir)
    conn.close()
    return ImportResult(imported, dup, bad, other, sum(e["nbytes"] for e in entries))


def _write(conn: Any, writer: SegmentWriter, tok: int, batch: list[tuple[dict, bytes]]) -> int:
    if not batch:
        return 0
    seg, offsets = writer.append([b for _, b in batch])
    now = int(time.time())
    cols = np.array(
        [
            (seg, off, e["nbytes"], e["ntokens"], e["n_prompt"], e["dtype"], e["checksum"], 0, now)
            for (e, _), off in zip(batch, offsets, strict=False)
        ],
        dtype=np.int64,
    )
    cols[:, 7] = meta_check(cols)
    with write_tx(conn):
        insert_entries(conn, [(e["key"], tok, *row) for (e, _), row in zip(batch, cols.tolist(), strict=False)])
    return len(batch)

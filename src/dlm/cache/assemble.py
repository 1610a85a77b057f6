"""The end of a tokenize session: record it (touched keys, the document's references,
changed roots' stat snapshots, the run), then assemble `TokenizedRows` over the kept
slots (skipped files give no row).

A root's snapshot is rewritten only when it changed (`RootState.dirty`). It remembers
content-derived skips only (`statindex.REMEMBERED`): a file whose read failed is
stored with no skip and no entry, so the next run reads it again.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from itertools import compress
from pathlib import Path

import numpy as np

from dlm.cache import statindex
from dlm.cache.index import NPROMPT, NTOK, SEG, totals, touch
from dlm.cache.reader import CachedRows, RowSource
from dlm.cache.report import CacheRunReport
from dlm.cache.schema import write_tx
from dlm.cache.shared import save_refs
from dlm.cache.slots import RootState, SlotTable
from dlm.cache.stores import Stores
from dlm.rows.types import RowSet, RowSpec
from dlm.tokenize.seam import TokenizedRows, TokenizeStats


def record(
    stores: Stores,
    table: SlotTable,
    roots: dict[int, RootState],
    doc: str,
    run_id: str,
    stale_keys: list[str],
    now_s: int,
    seconds: float,
) -> None:
    """Touch stale keys and save this document's references (store), then the changed
    roots' snapshots, the pruning of other snapshots and the run (document state)."""
    kept = len(table) - len(table.skip_reason)
    hits = int(table.is_hit.sum())
    with write_tx(stores.conn):
        if stale_keys:
            touch(stores.conn, stale_keys, now_s)
        save_refs(stores.conn, doc, (k for k in table.keys if k))
    tok = stores.state_tokenizer_id
    with write_tx(stores.state):
        for root in roots.values():
            if root.dirty:
                statindex.save(stores.state, tok, root.rid, snapshot(root, table), time.time_ns())
        statindex.keep_only(stores.state, tok, list(roots))
        stores.state.execute(
            "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?)",
            (run_id, time.time_ns(), kept, hits, kept - hits, seconds, tok),
        )


def snapshot(root: RootState, table: SlotTable) -> statindex.Snapshot:
    """The stat snapshot of `root` after this session (module docstring)."""
    slots, files, stats = root.slots, root.files, root.stats
    n = len(files)
    # arrays for the common case (an entry or none), a loop only over the few skipped
    # and lossy slots: a warm edit rewrites the snapshot of every file
    flags = np.where(table.entries[slots, SEG] >= 0, statindex.HAS_ENTRY, 0).astype(np.uint8)
    reason = np.zeros(n, dtype=np.uint8)
    if table.skip_reason or table.lossy:
        at = dict(zip(slots.tolist(), range(n), strict=False))
        for s, why in table.skip_reason.items():
            if (j := at.get(s)) is not None and (code := statindex.reason_code(why)):
                flags[j] = statindex.SKIPPED
                reason[j] = code
        for s in table.lossy:
            if (j := at.get(s)) is not None:
                flags[j] |= statindex.LOSSY
    digest = statindex.digests([table.keys[s] for s in slots.tolist()])
    entry = table.entries[slots].copy()
    entry[(flags & statindex.HAS_ENTRY) == 0] = 0
    return statindex.Snapshot(
        [f.relpath for f in files],
        stats[:, 0],
        stats[:, 1],
        stats[:, 2],
        stats[:, 3].view(np.uint64),
        table.read_at_ns[slots],
        entry,
        digest,
        flags,
        reason,
    )


def assemble(
    rows: RowSet,
    table: SlotTable,
    stores: Stores,
    report: CacheRunReport,
    *,
    in_memory: dict[str, np.ndarray],
    encode: Callable[[RowSpec], np.ndarray],
    state_dir: Path,
    tokenizer_sha256: str,
    seconds: float,
) -> TokenizedRows:
    """`TokenizedRows` over the kept slots, reading lazily from the store."""
    keep = np.ones(len(table), dtype=bool)
    keep[list(table.skip_reason)] = False
    kept = np.flatnonzero(keep).tolist()
    loc = table.entries[keep]
    hits = int(table.is_hit[keep].sum())
    report.hits, report.misses = hits, len(kept) - hits
    keys = list(compress(table.keys, keep.tolist())) if table.skip_reason else list(table.keys)
    n = len(kept)
    stats = TokenizeStats(n, hits, n - hits, seconds, totals(stores.conn)[0])
    source = RowSource(rows, table.n_text, kept, table.root, stores.state_tokenizer_id)
    read = CachedRows(
        state_dir=state_dir,
        store_dir=stores.store_dir,
        reader=stores.reader,
        entries=loc,
        keys=keys,  # type: ignore[arg-type]  # kept slots are all keyed
        in_memory=in_memory,
        source=source,
        encode=encode,
        tokenizer_sha256=tokenizer_sha256,
        stats=stats,
        warn=report.bad_entry,
        keepalive=(stores.conn, stores.state, stores.lease),
    )
    return TokenizedRows(
        lengths=loc[:, NTOK].copy(),
        n_prompt=loc[:, NPROMPT].astype(np.int32),
        keys=keys,  # type: ignore[arg-type]  # kept slots are all keyed
        read=read,
        kinds=[r.kind for r in rows.text_rows] + ["source"] * (n - table.n_text),
        files_taken=n - table.n_text,
        files_skipped=Counter(table.skip_reason.values()),
        lossy_files=len(table.lossy),
        stats=stats,
    )

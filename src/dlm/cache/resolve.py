"""Phase 1 of a tokenize session: resolve slots without reading any file.

Text slots are keyed from their text and looked up by key. File slots are matched,
vectorized, against their root's stat snapshot (`dlm.cache.statindex`): a trusted file
gives its key, skip reason (content-derived ones only), lossy flag and entry location
without being opened. Entries found are verified (`meta` check, segment opens); every
slot left over is pending, for phase 2 (`dlm.cache.admit`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dlm.cache import statindex
from dlm.cache.index import ACCESS, SEG, as_entries, lookup_keys, segment_names, valid_rows
from dlm.cache.report import CacheRunReport
from dlm.cache.schema import read_tx, root_value
from dlm.cache.slots import RootState, SlotTable, distinct, files_of
from dlm.cache.stores import Stores
from dlm.rows.read import text_row_spec
from dlm.rows.types import RowSet
from dlm.tokenize.plain import spec_key
from dlm.tokenize.seam import Progress

RACY_NS = 2_000_000_000
TOUCH_GRANULARITY_S = 3600


@dataclass
class Hits:
    """Slots resolved to entries (not yet verified) and slots left pending."""

    slots: list[np.ndarray] = field(default_factory=list)
    entries: list[np.ndarray] = field(default_factory=list)
    pending: list[int] = field(default_factory=list)

    def add(self, slots: np.ndarray, entries: np.ndarray) -> None:
        self.slots.append(slots)
        self.entries.append(entries)


@dataclass
class Resolve:
    """The resolve step over one session's table (module docstring).

    Attributes:
        trust_stat: False: no file is trusted on its stat (every file read and hashed).
        sibling_states: other documents' state databases that may start a root.
        stale_keys: keys whose `last_access` is older than the touch granularity,
            touched at the end of the session (shared with the admit step).
    """

    rows: RowSet
    table: SlotTable
    roots: dict[int, RootState]
    stores: Stores
    tokenizer_sha256: str
    trust_stat: bool
    sibling_states: list[Path]
    report: CacheRunReport
    progress: Progress
    now_s: int
    stale_keys: list[str] = field(default_factory=list)

    def run(self) -> list[int]:
        """Resolve every slot; returns the pending slots, sorted."""
        hits = Hits()
        conn = self.stores.conn
        for i, row in enumerate(self.rows.text_rows):
            self.table.keys[i] = spec_key(self.tokenizer_sha256, text_row_spec(row))
        with read_tx(conn):
            self.stores.segment_names = segment_names(conn)
            self._text_hits(hits)
            for root in self.roots.values():
                root.snapshot = self._snapshot(root)
                self._file_hits(root, hits)
        pending = hits.pending + self._accept(np.concatenate(hits.slots), np.concatenate(hits.entries))
        return sorted(pending)

    def _text_hits(self, hits: Hits) -> None:
        n_text, keys = self.table.n_text, self.table.keys
        found = lookup_keys(self.stores.conn, [k for k in keys[:n_text] if k])
        text_hits = [i for i in range(n_text) if keys[i] in found]
        hits.pending += [i for i in range(n_text) if keys[i] not in found]
        hits.add(np.array(text_hits, dtype=np.int64), as_entries([found[keys[i]] for i in text_hits]))  # type: ignore[index]  # text slots are keyed

    def _snapshot(self, root: RootState) -> statindex.Snapshot | None:
        """The root's snapshot, or a sibling document's when this one has none."""
        snap, damaged = statindex.load(self.stores.state, self.stores.state_tokenizer_id, root.rid)
        if damaged:
            self.report.warn(f"stat index of {root.path} was damaged; re-reading its files")
        elif snap is None and self.sibling_states and self.trust_stat:
            snap = statindex.sibling_snapshot(
                self.sibling_states, self.stores.store_id, self.tokenizer_sha256, root_value(root.path)
            )
            root.dirty = root.dirty or snap is not None  # this document writes a snapshot of its own
        return snap

    def _file_hits(self, root: RootState, hits: Hits) -> None:
        table, slots, snap = self.table, root.slots, root.snapshot
        root.files = files_of(self.rows, table.n_text, slots)
        root.stats = statindex.file_stats(root.files)
        root.pos, ok = statindex.trusted(snap, root.files, root.stats, RACY_NS)
        if not self.trust_stat:
            ok[:] = False  # every file read and hashed; entries still found by key
        table.root[slots] = root.rid
        if snap is None or len(snap.relpaths) != len(root.files) or not ok.all():
            root.dirty = True
        if snap is None:
            hits.pending.extend(slots.tolist())
            return
        pos = root.pos
        p = np.maximum(pos, 0)
        flags, reason = snap.flags[p], snap.reason[p]
        skipped = ok & ((flags & statindex.SKIPPED) > 0) & statindex.REMEMBERED_CODES[reason]
        hit = ok & ((flags & (statindex.SKIPPED | statindex.HAS_ENTRY)) == statindex.HAS_ENTRY)
        for slot, code in zip(slots[skipped].tolist(), reason[skipped].tolist(), strict=False):
            table.skip_reason[slot] = statindex.REASONS[code]
        for slot, key in zip(slots[hit].tolist(), snap.keys(pos[hit]), strict=False):
            table.keys[slot] = key
        table.lossy.update(slots[hit & ((flags & statindex.LOSSY) > 0)].tolist())
        table.read_at_ns[slots[ok]] = snap.recorded[p[ok]]
        entries = snap.entry[pos[hit]]
        if time.time_ns() - snap.written_ns > TOUCH_GRANULARITY_S * 10**9:
            entries = entries.copy()
            entries[:, ACCESS] = 0  # stale: touched in the index, snapshot rewritten
            root.dirty = True
        hits.add(slots[hit], entries)
        rest = slots[~(hit | skipped)]
        if rest.size:
            root.dirty = True
            hits.pending.extend(rest.tolist())

    def _accept(self, slots: np.ndarray, entries: np.ndarray) -> list[int]:
        """Take verified entries whose segment opens; returns the slots that go pending."""
        table, stores = self.table, self.stores
        ok = valid_rows(entries)
        if not ok.all():
            self.report.corrupt += int((~ok).sum())
            self.report.warn(f"{int((~ok).sum())} cache index rows failed their check; re-tokenizing")
        for seg in distinct(entries[ok, SEG]):
            name = stores.segment_names.get(seg)
            if name is None or not stores.reader.open(seg, name):
                ok &= entries[:, SEG] != seg
                stores.drop_segment(seg, self.report.warn)
        table.entries[slots[ok]] = entries[ok]
        table.is_hit[slots[ok]] = True
        stale = ok & (entries[:, ACCESS] < self.now_s - TOUCH_GRANULARITY_S)
        self.stale_keys += [k for s in slots[stale].tolist() if (k := table.keys[s])]
        table.entries[slots[stale], ACCESS] = self.now_s
        bad = slots[~ok]
        for rid in table.roots_of(slots[stale]) + table.roots_of(bad):
            self.roots[rid].dirty = True
        self.progress.advance(int(ok.sum()))
        return bad.tolist()

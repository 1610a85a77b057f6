"""The L1 level of the tokenizer cache: prompt prefixes that end where an added token starts.

A prefix of a prompt's UTF-8 bytes up to the start of an added token (`<|im_start|>`,
`[SEP]`, ...) is encoded without special tokens, keyed by (tokenizer_sha256, xxh3-128 of
the prefix) and stored in an `LruStore`; `plan.py` proves, per tokenizer, why ids of
such a cut joined to the ids of the rest equal the ids of the whole. `lookup` finds
boundaries from the end of the prompt, hashes their prefixes deepest first until one
is cached, and encodes only the rest (less the short closing pieces `pieces.py`
knows); on a hit it queues the deepest new boundary, on a miss the first and the
deepest few (`HEAD_BOUNDARIES`, `TAIL_STORED`), for the caller to `commit` (or not,
for a prompt it refuses). A miss costs one tokenizer call, as no cache does.
Thread-safe as the store is; the piece cache is best-effort.
"""

from __future__ import annotations

import re
import sys
from array import array
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import xxhash

from dlm.serve.tokcache.pieces import PieceCache
from dlm.serve.tokcache.plan import SplitPlan
from dlm.serve.tokcache.store import LruStore

L1_KEY_BYTES = sys.getsizeof(("", 0)) + sys.getsizeof(1 << 127)

HEAD_BOUNDARIES = 2
"""The first boundaries of a prompt, probed and stored: a head it shares with other
prompts (a system prompt, few-shot examples) ends there or is reached from there."""

TAIL_PROBED = 8
"""The deepest boundaries of a prompt, probed: a conversation's next prompt adds a few
boundaries (ChatML's answer and question 4, Llama 3's 6, reasoning or tool tokens a
few more), so the previous prompt's deepest is among them."""

TAIL_STORED = 4
"""The deepest boundaries stored on a miss: the next turn's prompt extends the deepest,
and a prompt with the same history and another last message (2 boundaries a message in
ChatML, 3 in Llama 3) shares up to one of these."""

MAX_BOUNDARIES = HEAD_BOUNDARIES + TAIL_PROBED
"""Boundaries probed per prompt. Each costs a hash on every miss, each stored one an
entry in L1, so a miss's own cost stays within a few percent of the encode it does
(docs/benchmarks.md); a prompt branching from the middle of a long conversation hits
at the head and encodes the rest (exact, slower)."""

Put = tuple[Any, array]
"""An L1 entry to store: (key, ids)."""


class Encoding(Protocol):
    """What the Rust tokenizer's `Encoding` gives here."""

    ids: list[int]

    def char_to_token(self, char_pos: int) -> int | None: ...


class Backend(Protocol):
    """The Rust `tokenizers.Tokenizer` behind a fast tokenizer (`backend_tokenizer`)."""

    truncation: Any
    padding: Any
    encode_special_tokens: bool

    def encode(self, text: str, add_special_tokens: bool = True) -> Encoding: ...

    def encode_batch_fast(self, texts: list[str], add_special_tokens: bool = True) -> list[Encoding]: ...

    def token_to_id(self, token: str) -> int | None: ...

    def get_vocab(self, with_added_tokens: bool = True) -> dict[str, int]: ...

    def to_str(self) -> str: ...


def backend_ids(backend: Backend, text: str, add_special: bool) -> list[int]:
    """The backend's ids of `text`, without character offsets: `encode_batch_fast`
    on a batch of one gives the same ids as `encode` and skips building offsets, a
    sizeable share of the cost of a short piece (docs/benchmarks.md, "Tokenizer cache:
    arrays or tuples")."""
    return backend.encode_batch_fast([text], add_special_tokens=add_special)[0].ids


class PrefixLevel:
    """L1 over one tokenizer (see module docstring).

    Args:
        store: the level's bounded store. plan: the tokenizer's split plan.
        backend: the Rust tokenizer. tokenizer_sha256 / seed: part of every key.
        typecode: "H" or "I", the array type of stored ids.
    """

    def __init__(
        self, store: LruStore, plan: SplitPlan, backend: Backend, tokenizer_sha256: str, seed: int, typecode: str
    ):
        self.store = store
        self.plan = plan
        self.backend = backend
        self.tokenizer_sha256 = tokenizer_sha256
        self.seed = seed
        self.typecode = typecode
        self.pieces = PieceCache()
        split_ids = [backend.token_to_id(content) for content in plan.split_tokens]
        self._id_of = {c.encode(): i for c, i in zip(plan.split_tokens, split_ids, strict=True) if i is not None}
        self._exact_ids = bool(self._id_of) and len(self._id_of) == len(split_ids)

    def pack(self, ids: Iterable[int]) -> array:
        return array(self.typecode, ids)

    def ids_of(self, text: str, add_special: bool) -> list[int]:
        return backend_ids(self.backend, text, add_special)

    def commit(self, pending: list[Put]) -> None:
        """Store the entries `lookup` / `warm` queued."""
        self.store.put_many(pending, L1_KEY_BYTES)

    def warm(self, data: bytes) -> int:
        """Store the boundary prefixes of the UTF-8 text `data` that a miss would store
        (its first and deepest few); how many were stored."""
        plan = self.plan
        if plan.bypass_re is not None and plan.bypass_re.search(data):
            return 0
        matches = self.plan.matches(data)
        starts = self.kept([m.start() for m in matches])
        pending: list[Put] = []
        self.encode_storing(data, starts, self.prefix_keys(data, starts), pending, matches)
        self.commit(pending)
        return len(pending)

    def clear(self) -> None:
        self.store.clear()
        self.pieces.clear()

    def lookup(self, data: bytes, pending: list[Put]) -> tuple[array, list[int], list[int], int] | None:
        """Ids without special tokens of the UTF-8 text `data` via the prefix cache, as
        (prefix ids, ids of the rest, all ids as a fresh list, how many came from the
        cache), or None to encode plainly (no boundary, or a token that bypasses L1).
        The entries to store are appended to `pending` (the caller stores them, or not
        when the prompt is refused)."""
        plan = self.plan
        if plan.bypass_re is not None and plan.bypass_re.search(data):
            return None
        l1 = self.store
        seen: list[int] = []
        keys: list[tuple[str, int]] = []
        scan: list[re.Match[bytes]] = []
        found_at, prefix = l1.deepest(self._probe_keys(data, self.probe_starts(data, scan), seen, keys))
        if not seen:  # no boundary
            return None
        if prefix is None:
            matches = scan or plan.matches(data)
            forward = self.kept([m.start() for m in matches])
            # every kept boundary was probed (and hashed) unless the prompt has none deeper
            keys = keys[::-1] if len(seen) == len(forward) else self.prefix_keys(data, forward)
            packed, ids = self.encode_storing(data, forward, keys, pending, matches)
            return packed, [], ids, 0
        ids = prefix.tolist()
        deepest = seen[0]
        if found_at == 0:
            rest = self.encode_piece(data[deepest:])
            ids += rest
            return prefix.ids, rest, ids, len(prefix.ids)
        # One encode of the rest, less the known short pieces it ends with (the chat
        # template's closing turn); boundaries split the ids exactly, so the deepest
        # one gives the new prefix, stored for the next turn.
        begin = seen[found_at]
        end, peeled = self.pieces.peel(data, seen[:found_at])
        segment = data[begin:end]
        rest = self.ids_of(segment.decode("utf-8"), False)
        cut: int | None
        if end > deepest:  # the final piece is encoded: split there, learn the pieces before the end
            cuts = self.cuts(self.plan.matches(segment), rest)
            cut = None if cuts is None else cuts.get(deepest - begin)
            if cuts is not None:
                inner = [b - begin for b in seen[:found_at] if b < end]
                self.pieces.learn(segment, rest, [(b, cuts[b]) for b in inner if b in cuts])
        else:  # the final piece was peeled: the new prefix ends where it starts
            cut = len(rest) + sum(len(piece) for _, piece in peeled[:-1])
        for _, piece in peeled:
            rest += piece
        n_prefix = len(ids)
        ids += rest
        if cut is not None:  # None: not provable here; do not store, the result is still exact
            pending.append((keys[0], prefix.ids + self.pack(rest[:cut])))
        return prefix.ids, rest, ids, n_prefix

    def encode_storing(
        self, data: bytes, starts: list[int], keys: list[Any], pending: list[Put], matches: list[re.Match[bytes]]
    ) -> tuple[array, list[int]]:
        """Ids (no special tokens) of the UTF-8 text `data` in at most one tokenizer
        call, as an array and a fresh list, queuing in `pending` the prefix before each
        boundary of `starts` (ascending, with their `keys`) that a miss stores (the
        first `HEAD_BOUNDARIES`, the last `TAIL_STORED`), while it fits one entry's
        share of L1; `matches`: `plan.matches(data)`.

        The short pieces `data` ends with come from the piece cache when known; the rest
        is encoded in one call, not one per piece: the tokenizer's fixed cost per call
        is what made a piece-by-piece encode dearer than no cache. The call skips
        character offsets; `cuts` finds where each prefix's ids end. The short pieces
        the encoded part ends with are learnt on the way."""
        end, peeled = self.pieces.peel(data, reversed(starts))
        head = data[:end]
        ids = self.ids_of(head.decode("utf-8"), False)
        packed = self.pack(ids)
        cuts = self.cuts([m for m in matches if m.start() < end] if peeled else matches, ids)
        if cuts is not None:
            self.pieces.learn(head, ids, [(b, cuts[b]) for b in reversed(starts) if b < end])
        for start, piece in peeled:
            if cuts is not None:
                cuts[start] = len(ids)
            ids += piece
            packed += self.pack(piece)
        if cuts is None:  # not provable for this text: store nothing, the ids are exact
            return packed, ids
        fits = self.store.fits
        n_starts = len(starts)
        chosen: Iterable[int] = range(n_starts)
        if n_starts > HEAD_BOUNDARIES + TAIL_STORED:
            chosen = [*range(HEAD_BOUNDARIES), *range(n_starts - TAIL_STORED, n_starts)]
        for j in chosen:
            start, key = starts[j], keys[j]
            prefix = packed[: cuts[start]]
            if not fits(prefix, L1_KEY_BYTES):
                break
            pending.append((key, prefix))
        return packed, ids

    def cuts(self, matches: list[re.Match[bytes]], ids: list[int]) -> dict[int, int] | None:
        """For each stage-1 added-token match of a text (`matches`: `plan.matches` of
        its UTF-8 bytes; `ids`: its ids, encoded whole without special tokens), its byte
        offset -> the index of its token in `ids`; None when that cannot be read off
        the ids.

        Each match becomes one token of its own id, in text order. When the ids hold
        exactly as many ids of the matched tokens as the text holds matches, none came
        from ordinary text, so the k-th such id is the k-th match: exact, and without
        the character offsets the tokenizer would otherwise compute for the whole text.
        (A split id the text does not match cannot be taken for a match.) When ordinary
        text did give such an id (a vocabulary where the model can produce one), the
        counts differ and the answer is None."""
        if not self._exact_ids:
            return None
        id_of = self._id_of
        found: list[int] = []
        for token in {id_of[m.group()] for m in matches}:
            count = ids.count(token)  # C-level scans: how many, then where
            if len(found) + count > len(matches):
                return None
            at = -1
            for _ in range(count):
                at = ids.index(token, at + 1)
                found.append(at)
        if len(found) != len(matches):
            return None
        found.sort()
        return dict(zip([m.start() for m in matches], found, strict=True))

    def boundaries(self, data: bytes) -> list[int]:
        """Byte offsets (> 0) where a stage-1 added-token match starts (see plan.py),
        at most `MAX_BOUNDARIES` of them."""
        return self.kept(self.plan.match_starts(data))

    @staticmethod
    def kept(matches: list[int]) -> list[int]:
        """The boundaries probed among `matches` (ascending match starts): those > 0,
        the first `HEAD_BOUNDARIES` and last `TAIL_PROBED` when there are more."""
        starts = matches[1:] if matches and matches[0] == 0 else matches
        if len(starts) > MAX_BOUNDARIES:
            starts = starts[:HEAD_BOUNDARIES] + starts[-TAIL_PROBED:]
        return starts

    def probe_starts(self, data: bytes, scan: list[re.Match[bytes]] | None = None) -> Iterator[int]:
        """The boundaries of `boundaries(data)`, deepest first, found lazily: with a
        `match_lead`, the last `TAIL_PROBED` by scanning back from the end (a hit is
        usually among the deepest few, even in a prompt with hundreds of boundaries),
        and the head only if needed, from a forward scan whose matches are appended to
        `scan` (for a miss to reuse)."""
        lowest = len(data) + 1
        if self.plan.match_lead:
            found: list[re.Match[bytes]] = []
            for match in self.plan.matches_reversed(data):
                start = match.start()
                if start == 0 or len(found) == TAIL_PROBED:
                    break
                found.append(match)
                yield start
                lowest = start
            else:  # reached the start: the scan saw every match
                if scan is not None:
                    scan.extend(reversed(found))
                return
            if start == 0:  # likewise, and one more match starts the text
                if scan is not None:
                    scan.extend([match, *reversed(found)])
                return
        matches = self.plan.matches(data)
        if scan is not None:
            scan.extend(matches)
        for start in reversed(self.kept([m.start() for m in matches])):
            if start < lowest:
                yield start

    def _probe_keys(
        self, data: bytes, starts: Iterator[int], seen: list[int], keys: list[tuple[str, int]]
    ) -> Iterator[tuple[str, int]]:
        """(tokenizer_sha256, xxh3-128 of data[:b]) for each b of `starts`, hashed only when
        probed; each b and key is appended to `seen` and `keys`."""
        view = memoryview(data)
        tokenizer_sha256, seed = self.tokenizer_sha256, self.seed
        for start in starts:
            key = (tokenizer_sha256, xxhash.xxh3_128_intdigest(view[:start], seed=seed))
            seen.append(start)
            keys.append(key)
            yield key

    def prefix_keys(self, data: bytes, starts: list[int]) -> list[tuple[str, int]]:
        """(tokenizer_sha256, xxh3-128 of data[:b]) for each b, in one streaming pass."""
        hasher = xxhash.xxh3_128(seed=self.seed)
        view = memoryview(data)
        keys = []
        begin = 0
        tokenizer_sha256 = self.tokenizer_sha256
        for end in starts:
            hasher.update(view[begin:end])
            keys.append((tokenizer_sha256, hasher.intdigest()))
            begin = end
        return keys

    def encode_piece(self, piece: bytes) -> list[int]:
        """Ids of text between boundaries (no special tokens added), known ones from the
        piece cache."""
        if not piece:
            return []
        known = self.pieces.get(piece)
        if known is not None:
            return list(known)
        ids = self.ids_of(piece.decode("utf-8"), False)
        self.pieces.put(piece, ids)
        return ids

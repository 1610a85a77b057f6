"""Prove, per tokenizer, where a prompt may be split without changing its ids.

The Hugging Face `tokenizers` pipeline encodes a text in this order:

1. added tokens whose `normalized` flag is false are matched on the raw text,
   leftmost-longest (an Aho-Corasick automaton), and cut out as finished tokens;
2. every remaining piece is normalized on its own, then added tokens with
   `normalized: true` are matched inside it;
3. the pre-tokenizer splits each piece, the model turns each split into ids;
4. the post-processor adds BOS/EOS/CLS/SEP around the whole sequence.

So pieces between stage-1 matches never influence each other, with two
exceptions this module checks: a component that looks at a piece's position in
the original text (Metaspace with `prepend_scheme: "first"` looks for offset 0),
and the post-processor, which runs once on the whole.

A split point B is therefore exact when B is the *start* of a stage-1 match of an
added token (special or not; chat templates are made of special ones):
`ids(text) == ids(text[:B]) + ids(text[B:])` with special tokens left out,
because (a) leftmost-longest matching of `text[:B]` finds the same matches before
B (every match before B ends at or before B), (b) `text[B:]` starts with that
added token, so no piece of either half starts at offset 0
unless it did in the whole, and (c) the pieces are the same strings. The
post-processor's template is then applied once around the whole, when its shape
is known exactly (`Template`); otherwise requests with `add_special_tokens=True`
bypass L1.

Not provably safe, hence refused (L1 disabled for the tokenizer, with a reason):
unknown normalizer / pre-tokenizer / post-processor / model types, BPE dropout,
added tokens with empty content. Stage-1 added tokens with `lstrip`, `rstrip` or
`single_word` change where matches fall; a prompt containing one of them
bypasses L1 (`bypass_re`), and they are never split points.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

_SAFE_NORMALIZERS = frozenset(
    {
        "NFC", "NFD", "NFKC", "NFKD", "Lowercase", "Strip", "StripAccents", "Replace",
        "Prepend", "BertNormalizer", "Nmt", "Precompiled", "ByteLevel",
    }
)  # fmt: skip
_SAFE_PRE_TOKENIZERS = frozenset(
    {
        "ByteLevel", "Whitespace", "WhitespaceSplit", "BertPreTokenizer", "Punctuation",
        "Digits", "Split", "Metaspace", "UnicodeScripts", "CharDelimiterSplit",
    }
)  # fmt: skip
_SAFE_MODELS = frozenset({"BPE", "WordPiece", "Unigram", "WordLevel"})


@dataclass(frozen=True)
class Template:
    """What the post-processor adds around a single sequence when special tokens are on.

    Attributes:
        pre_ids / post_ids: ids added before / after the sequence.
        pre_types / post_types: their token type ids; seq_type: type id of the sequence.
    """

    pre_ids: tuple[int, ...] = ()
    post_ids: tuple[int, ...] = ()
    pre_types: tuple[int, ...] = ()
    post_types: tuple[int, ...] = ()
    seq_type: int = 0

    def wrap(self, outer: Template) -> Template:
        """The template of applying `self` first, then `outer` (a `Sequence` processor)."""
        return Template(
            pre_ids=outer.pre_ids + self.pre_ids,
            post_ids=self.post_ids + outer.post_ids,
            pre_types=outer.pre_types + self.pre_types,
            post_types=self.post_types + outer.post_types,
            seq_type=self.seq_type,
        )


IDENTITY = Template()


@dataclass(frozen=True)
class SplitPlan:
    """The decision for one tokenizer: may L1 split prompts, and where.

    Attributes:
        l1_ok: L1 may be used (both for add_special_tokens True and False).
        reason: why not, when `l1_ok` is false; "" otherwise.
        deterministic: false when encoding is random (BPE dropout): no level may cache.
        match_re: bytes regex matching the stage-1 added tokens leftmost-longest; every
            match start (> 0) is a split point.
        match_lead: the byte every token of `match_re` starts with and none contains
            anywhere else (b"<" for ChatML, b"[" for BERT), or b"". Then a match can
            neither overlap another nor start inside one, so each candidate found by
            `bytes.rfind` is checked on its own, and a scan can run from the end.
        bypass_re: bytes regex of stage-1 tokens with lstrip/rstrip/single_word, or None.
        template: what `add_special_tokens=True` adds around the sequence.
        split_tokens: the contents `match_re` matches (each match is one token of
            that content's id).
    """

    l1_ok: bool
    reason: str = ""
    deterministic: bool = True
    match_re: re.Pattern[bytes] | None = None
    match_lead: bytes = b""
    bypass_re: re.Pattern[bytes] | None = None
    template: Template = IDENTITY
    split_tokens: tuple[str, ...] = ()

    def match_starts(self, data: bytes) -> list[int]:
        """Byte offsets where `match_re` matches in `data`, leftmost-longest and
        non-overlapping ([] when L1 is refused)."""
        return [m.start() for m in self.matches(data)]

    def matches(self, data: bytes) -> list[re.Match[bytes]]:
        """The matches of `match_starts`, in order. With a `match_lead`, only the
        positions of that byte are tried (found by `bytes.find`, in C), each on its
        own: a regex scan tries every position, which costs several times more."""
        if self.match_re is None:
            return []
        if not self.match_lead:
            return list(self.match_re.finditer(data))
        lead, find, match = self.match_lead, data.find, self.match_re.match
        found = []
        at = find(lead)
        while at >= 0:
            hit = match(data, at)
            if hit is not None:
                found.append(hit)
            at = find(lead, at + 1)
        return found

    def match_starts_reversed(self, data: bytes) -> Iterator[int]:
        """`match_starts(data)` from the last to the first, lazily: the few deepest cost
        a few `rfind` calls however many the prompt holds. Needs `match_lead`."""
        return (m.start() for m in self.matches_reversed(data))

    def matches_reversed(self, data: bytes) -> Iterator[re.Match[bytes]]:
        """The matches of `match_starts_reversed`. Needs `match_lead`."""
        if not self.match_lead or self.match_re is None:
            raise ValueError("matches_reversed needs a match_lead")
        lead, rfind, match = self.match_lead, data.rfind, self.match_re.match
        at = rfind(lead)
        while at >= 0:
            hit = match(data, at)
            if hit is not None:
                yield hit
            at = rfind(lead, 0, at)


def plan_for(backend_json: str) -> SplitPlan:
    """Inspect a fast tokenizer's JSON (`backend_tokenizer.to_str()`) and decide.

    Never raises for an unknown shape: it answers `SplitPlan(l1_ok=False, reason=...)`.
    """
    spec = json.loads(backend_json)
    model = spec.get("model") or {}
    if model.get("dropout"):
        return SplitPlan(False, "BPE dropout makes encoding random", deterministic=False)
    problems = _component_problems(spec)
    if problems:
        return SplitPlan(False, "; ".join(problems))
    template = _template(spec.get("post_processor"))
    if template is None:
        kind = (spec.get("post_processor") or {}).get("type")
        return SplitPlan(False, f"post-processor {kind!r} cannot be reproduced exactly")
    return _added_token_plan(spec.get("added_tokens") or [], template)


def _component_problems(spec: dict[str, Any]) -> list[str]:
    problems = []
    model_type = (spec.get("model") or {}).get("type")
    if model_type not in _SAFE_MODELS:
        problems.append(f"model type {model_type!r} is not known to be position-independent")
    for part, allowed, key in (
        ("normalizer", _SAFE_NORMALIZERS, "normalizers"),
        ("pre_tokenizer", _SAFE_PRE_TOKENIZERS, "pretokenizers"),
    ):
        for kind in _component_types(spec.get(part), key):
            if kind not in allowed:
                problems.append(f"{part} {kind!r} is not known to be split-safe")
    return problems


def _component_types(node: Any, child_key: str) -> list[str]:
    if node is None:
        return []
    if node.get("type") == "Sequence":
        return [t for child in node.get(child_key, []) for t in _component_types(child, child_key)]
    return [str(node.get("type"))]


def _template(node: Any) -> Template | None:
    """The exact template of a post-processor, or None when it cannot be reproduced."""
    if node is None:
        return IDENTITY
    kind = node.get("type")
    if kind == "ByteLevel":  # touches offsets only
        return IDENTITY
    if kind in ("BertProcessing", "RobertaProcessing"):
        (_, sep), (_, cls) = node["sep"], node["cls"]
        return Template(pre_ids=(int(cls),), post_ids=(int(sep),), pre_types=(0,), post_types=(0,))
    if kind == "TemplateProcessing":
        return _template_processing(node)
    if kind == "Sequence":
        result = IDENTITY
        for child in node.get("processors", []):
            inner = _template(child)
            if inner is None:
                return None
            result = result.wrap(inner)
        return result
    return None


def _template_processing(node: dict[str, Any]) -> Template | None:
    specials = node.get("special_tokens", {})
    pre_ids: list[int] = []
    post_ids: list[int] = []
    pre_types: list[int] = []
    post_types: list[int] = []
    seq_type = None
    for piece in node.get("single", []):
        if "Sequence" in piece:
            if piece["Sequence"]["id"] != "A" or seq_type is not None:
                return None
            seq_type = int(piece["Sequence"]["type_id"])
            continue
        token = piece["SpecialToken"]
        ids = [int(i) for i in specials[token["id"]]["ids"]]
        (pre_ids if seq_type is None else post_ids).extend(ids)
        (pre_types if seq_type is None else post_types).extend([int(token["type_id"])] * len(ids))
    if seq_type is None:
        return None
    return Template(tuple(pre_ids), tuple(post_ids), tuple(pre_types), tuple(post_types), seq_type)


def _added_token_plan(added: list[dict[str, Any]], template: Template) -> SplitPlan:
    stage1 = [t for t in added if not t.get("normalized", False)]
    if any(not t.get("content") for t in stage1):
        return SplitPlan(False, "an added token has empty content")
    flagged = [t for t in stage1 if t.get("lstrip") or t.get("rstrip") or t.get("single_word")]
    plain = [t for t in stage1 if t not in flagged]
    if not plain:
        return SplitPlan(False, "no added token is matched on the raw text")
    leads = {t["content"].encode()[:1] for t in plain}
    lead = leads.pop() if len(leads) == 1 else b""
    if any(lead in t["content"].encode()[1:] for t in plain):
        lead = b""
    return SplitPlan(
        True,
        match_re=literal_trie_re([t["content"] for t in plain]),
        match_lead=lead,
        bypass_re=literal_trie_re([t["content"] for t in flagged]) if flagged else None,
        template=template,
        split_tokens=tuple(t["content"] for t in plain),
    )


def literal_trie_re(contents: list[str]) -> re.Pattern[bytes]:
    """A bytes regex matching `contents` leftmost-longest, shaped as a trie.

    `re` scans left to right and, at each position, takes the first alternative that
    matches; at every trie node longer continuations come before "stop here", so the
    match is the longest literal starting there. Matching UTF-8 bytes finds the same
    matches as matching characters (UTF-8 is self-synchronizing) and gives byte offsets.
    Sharing prefixes makes the scan about twice as fast as a flat alternation.
    """
    trie: dict[Any, Any] = {}
    for content in contents:
        node = trie
        for byte in content.encode():
            node = node.setdefault(byte, {})
        node[None] = {}
    return re.compile(_trie_pattern(trie))


def _trie_pattern(node: dict[Any, Any]) -> bytes:
    branches = [
        re.escape(bytes([byte])) + _trie_pattern(child)
        for byte, child in sorted((k, v) for k, v in node.items() if k is not None)
    ]
    if None in node and branches:
        branches.append(b"")
    if len(branches) == 1:
        return branches[0]
    return b"(?:" + b"|".join(branches) + b")" if branches else b""

"""`dlm show DOC --tokens PATH_OR_SECTION`: what the model sees of one row.

The row's ids come from the same tokenize call as training (the tokenized-section cache
when it is on, so a warm cache reads them back instead of re-encoding). For each token:
its id, its piece (the tokenizer's vocabulary entry) and text, whether it carries loss
and whether a window or packed block starts at it. Rules, as `dlm.train.dataset` and
`dlm.train.heldout` apply them:

- a token carries loss when it is past the row's prompt (instruction rows mask the
  question) and something before it in the same example predicts it: with windows
  that is every token but the row's first (windows overlap by one token); packing puts
  whole windows into blocks, each attending only to itself, so the rule is the same;
- a held-out row does not train: its tokens carry loss only in the held-out window it
  is scored on (`dlm.train.evaluate.build_eval_set`).

A selector names a source file (its path relative to its `sources` root, or a path to
it), an in-body row (the line number of a prose section or of a `### Q`, as
`path:line` origins give it), or a `training.synth` pair (`relpath:line` of its
origin `relpath:line (synth)`: the first phrasing drawn from that definition).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlm.actions.common import DocPath, base_tokenizer, doc_dir, open_document
from dlm.errors import UsageError
from dlm.rows.types import FileRow, RowSet, TextRow
from dlm.tokenize.seam import TokenizedRows
from dlm.train.heldout import Split

DEFAULT_LIMIT = 200


@dataclass(frozen=True)
class RowTokens:
    """One row as the model sees it. `tokens[i]`: {position, id, piece, text, loss, cut}."""

    selector: str
    source: str
    kind: str
    key: str
    n_tokens: int
    n_prompt: int
    heldout: bool
    cuts: list[int]
    layout: str
    tokens: list[dict[str, Any]]


def _select(rows: RowSet, selector: str, base_dir: Path) -> TextRow | FileRow:
    """The text or file row `selector` names (see module docstring)."""
    if selector.isdigit():
        line = f":{selector}"
        for row in rows.text_rows:
            if row.origin.endswith(line):
                return row
        raise UsageError(
            f"no prose section or ### Q starts at line {selector}; "
            f"lines with one: {', '.join(r.origin.rsplit(':', 1)[1] for r in rows.text_rows)}"
        )
    synth = f"{selector} (synth)"  # `relpath:line`: the first training.synth pair drawn from there
    for row in rows.text_rows:
        if row.origin == synth:
            return row
    wanted = os.path.abspath(base_dir / selector)
    for frow in rows.file_rows:
        if frow.relpath == selector or frow.path == wanted or frow.path == os.path.abspath(selector):
            return frow
    raise UsageError(
        f"{selector!r} is not a source file this document takes nor a section line; "
        f"give a path relative to a sources root or the line of a section"
    )


def _cuts(layout: str, length: int, offset: int, sequence_len: int) -> list[int]:
    """Row positions where a new training example starts (windows or packed blocks)."""
    if layout == "windows":
        stride = max(sequence_len - 1, 1)
        return list(range(0, max(length - 1, 1), stride))
    first = -(-offset // sequence_len) * sequence_len
    return [p - offset for p in range(first, offset + length, sequence_len)]


def _loss_and_cuts(
    tokenized: TokenizedRows, split: Split, index: int, heldout: bool, layout: str, sequence_len: int
) -> tuple[np.ndarray, list[int]]:
    """(loss: 1-D bool [n_tokens] of row `index`, cut positions), by the module's rules."""
    from dlm.train.evaluate import eval_window

    length, n_prompt = int(tokenized.lengths[index]), int(tokenized.n_prompt[index])
    if heldout:
        loss = np.zeros(length, dtype=bool)
        window = eval_window(length, n_prompt, sequence_len)
        if window is not None and bool((split.scored == index).any()):
            loss[max(window[0] + 1, n_prompt) : window[1]] = True
        return loss, []
    train = split.train.tolist()
    offset = int(tokenized.lengths[train[: train.index(index)]].sum())
    cuts = _cuts(layout, length, offset, sequence_len)
    loss = np.arange(length) >= n_prompt
    for start in cuts if layout == "packed" else [0]:
        loss[start] = False
    return loss, cuts


def row_tokens(path: DocPath, selector: str, limit: int = DEFAULT_LIMIT, use_cache: bool = True) -> RowTokens:
    """Tokens of the row `selector` names in the document at `path`, the first `limit` of
    them (see module docstring).

    Raises:
        DocError: the document cannot be parsed.
        UsageError: nothing matches `selector`, or the file is skipped (binary, too large).
        BaseModelError, SourceError: as `dlm train` raises them.
    """
    from dlm.actions.training.plan import make_row_encoder
    from dlm.rows.build import build_rows
    from dlm.rows.read import read_file_row, text_row_spec
    from dlm.tokenize.plain import spec_key
    from dlm.train.heldout import split_rows

    doc, store = open_document(path)
    training = doc.frontmatter.training
    base_dir = doc_dir(doc) or Path.cwd()
    _, tokenizer, tokenizer_sha256 = base_tokenizer(doc)
    built = build_rows(doc, tokenizer)
    row = _select(built.rows, selector, base_dir)
    if isinstance(row, TextRow):
        key, source = spec_key(tokenizer_sha256, text_row_spec(row)), row.origin
    else:
        got = read_file_row(row)
        if isinstance(got, str):
            raise UsageError(f"{row.path}: skipped by training ({got}), so the model sees none of it")
        key, source = spec_key(tokenizer_sha256, got.spec), row.path
    row_encoder = make_row_encoder(store, tokenizer, tokenizer_sha256, training, "show", use_cache, doc_dir(doc))
    tokenized = row_encoder.tokenize(built.rows)
    index = tokenized.keys.index(key)
    split = split_rows(tokenized, training.eval.fraction, training.eval.max_rows)
    ids = tokenized.read(index)
    n_prompt = int(tokenized.n_prompt[index])
    layout = "windows"  # packing places whole windows in blocks: the cuts and loss are the windows'
    heldout = bool((split.heldout == index).any())
    loss, cuts = _loss_and_cuts(tokenized, split, index, heldout, layout, training.sequence_len)
    shown = ids[:limit].tolist()
    pieces = tokenizer.convert_ids_to_tokens(shown)
    cut_set = set(cuts)
    tokens = [
        {
            "position": p,
            "id": int(i),
            "piece": piece,
            "text": tokenizer.decode([i]),
            "loss": bool(loss[p]),
            "cut": p in cut_set,
        }
        for p, (i, piece) in enumerate(zip(shown, pieces, strict=False))
    ]
    return RowTokens(
        selector=selector,
        source=source,
        kind=tokenized.kinds[index],
        key=key,
        n_tokens=int(ids.shape[0]),
        n_prompt=n_prompt,
        heldout=heldout,
        cuts=cuts,
        layout=layout,
        tokens=tokens,
    )

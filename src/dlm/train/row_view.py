"""`dlm show DOC --tokens PATH_OR_SECTION`: what the model sees of one row.

The row's ids come from the same tokenize call as training (the tokenized-section cache
when it is on, so a warm cache reads them back instead of re-encoding). For each token:
its id, its piece (the tokenizer's vocabulary entry) and text, whether it carries loss
and whether a window or packed block starts at it. Rules, as `dlm.train.dataset` and
`dlm.train.heldout` apply them:

- a token carries loss when it is past the row's prompt (instruction rows mask the
  question) and something before it in the same example predicts it: with windows
  that is every token but the row's first (windows overlap by one token); with packing,
  every token but the first of each block;
- a held-out row does not train: its tokens carry loss only in the held-out window it
  is scored on (`dlm.train.evaluate.build_eval_set`).

A selector names a source file (its path relative to its `sources` root, or a path to
it) or an in-body row (the line number of a prose section or of a `### Q`, as
`path:line` origins give it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dlm.errors import UsageError
from dlm.tokenize.seam import FileRow, TextRow

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

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def _select(rows: Any, selector: str, base_dir: Path) -> TextRow | FileRow:
    """The text or file row `selector` names (see module docstring)."""
    if selector.isdigit():
        line = f":{selector}"
        for row in rows.text_rows:
            if row.origin.endswith(line):
                return row
        raise UsageError(f"no prose section or ### Q starts at line {selector}; "
                         f"lines with one: {', '.join(r.origin.rsplit(':', 1)[1] for r in rows.text_rows)}")
    wanted = os.path.abspath(base_dir / selector)
    for frow in rows.file_rows:
        if frow.relpath == selector or frow.path == wanted or frow.path == os.path.abspath(selector):
            return frow
    raise UsageError(f"{selector!r} is not a source file this document takes nor a section line; "
                     f"give a path relative to a sources root or the line of a section")


def _cuts(layout: str, length: int, offset: int, sequence_len: int) -> list[int]:
    """Row positions where a new training example starts (windows or packed blocks)."""
    if layout == "windows":
        stride = max(sequence_len - 1, 1)
        return list(range(0, max(length - 1, 1), stride))
    first = -(-offset // sequence_len) * sequence_len
    return [p - offset for p in range(first, offset + length, sequence_len)]


def row_tokens(doc: Any, store: Any, selector: str, limit: int = DEFAULT_LIMIT, use_cache: bool = True) -> RowTokens:
    """Tokens of the row `selector` names in `doc` (see module docstring).

    Raises:
        UsageError: nothing matches `selector`, or the file is skipped (binary, too large).
        BaseModelError, SourceError: as `dlm train` raises them.
    """
    from dlm.models import load_tokenizer, resolve_base_model
    from dlm.rows import build_rows
    from dlm.tokenize.fingerprint import tokenizer_sha256
    from dlm.tokenize.plain import read_file_row, spec_key, text_row_spec
    from dlm.train.evaluate import eval_window
    from dlm.train.heldout import split_rows
    from dlm.train.run import make_row_tokenizer

    training = doc.frontmatter.training
    base_dir = doc.path.parent if doc.path else Path.cwd()
    tokenizer = load_tokenizer(resolve_base_model(doc.frontmatter.base_model, relative_to=base_dir))
    tok_sha = tokenizer_sha256(tokenizer)
    built = build_rows(doc, tokenizer)
    row = _select(built.rows, selector, base_dir)
    if isinstance(row, TextRow):
        key, source = spec_key(tok_sha, text_row_spec(row)), row.origin
    else:
        got = read_file_row(row)
        if isinstance(got, str):
            raise UsageError(f"{row.path}: skipped by training ({got}), so the model sees none of it")
        key, source = spec_key(tok_sha, got.spec), row.path
    tokenized = make_row_tokenizer(store, tokenizer, tok_sha, training, "show", use_cache).tokenize(built.rows)
    index = tokenized.keys.index(key)
    split = split_rows(tokenized, training.eval.fraction, training.eval.max_rows)
    ids = tokenized.read(index)
    n_prompt = int(tokenized.n_prompt[index])
    layout = "packed" if training.packing else "windows"
    heldout = bool((split.heldout == index).any())
    positions = np.arange(ids.shape[0])
    if heldout:
        cuts: list[int] = []
        loss = np.zeros(ids.shape[0], dtype=bool)
        window = eval_window(ids.shape[0], n_prompt, training.sequence_len)
        if window is not None and (split.scored == index).any():
            loss[max(window[0] + 1, n_prompt) : window[1]] = True
    else:
        train = [int(i) for i in split.train]
        before = train[: train.index(index)]
        offset = int(tokenized.lengths[before].sum()) if before else 0
        cuts = _cuts(layout, ids.shape[0], offset, training.sequence_len)
        loss = positions >= n_prompt
        starts = cuts if layout == "packed" else [0]
        loss[[c for c in starts if 0 <= c < ids.shape[0]]] = False
    shown = ids[:limit].tolist()
    pieces = tokenizer.convert_ids_to_tokens(shown)
    cut_set = set(cuts)
    tokens = [{"position": p, "id": int(i), "piece": piece, "text": tokenizer.decode([i]),
               "loss": bool(loss[p]), "cut": p in cut_set}
              for p, (i, piece) in enumerate(zip(shown, pieces))]
    return RowTokens(selector=selector, source=source, kind=tokenized.kinds[index], key=key,
                     n_tokens=int(ids.shape[0]), n_prompt=n_prompt, heldout=heldout, cuts=cuts,
                     layout=layout, tokens=tokens)


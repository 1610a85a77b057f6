"""The held-out split: deterministic, whole rows, a minimum pool per kind, monotone in fraction."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dlm.tokenize.keys import row_key
from dlm.tokenize.seam import TokenizedRows
from dlm.train.heldout import MIN_ROWS_PER_KIND, split_rows, split_value, subset

REPO = Path(__file__).resolve().parents[2]


def rows_of(kinds: list[str], texts: list[str] | None = None) -> TokenizedRows:
    texts = texts or [f"row {i}" for i in range(len(kinds))]
    ids = [np.arange(i + 2, dtype=np.uint16) for i in range(len(kinds))]
    return TokenizedRows(
        lengths=np.array([a.shape[0] for a in ids], dtype=np.int64),
        n_prompt=np.zeros(len(kinds), dtype=np.int32),
        keys=[row_key("sha256:tok", k, t) for k, t in zip(kinds, texts, strict=False)],
        read=ids.__getitem__,
        kinds=kinds,  # type: ignore[arg-type]
    )


def test_split_value_is_the_same_in_a_fresh_process():
    key = row_key("sha256:tok", "source", "# path: json/decoder.py\nimport re\n")
    code = f"from dlm.train.heldout import split_value; print(repr(split_value({key!r})))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "7"},
    )
    assert float(out.stdout) == split_value(key)
    assert 0.0 <= split_value(key) < 1.0


def test_share_held_out_follows_fraction_and_rows_never_move_back():
    rows = rows_of(["source"] * 5000)
    small = split_rows(rows, 0.02, 10_000)
    large = split_rows(rows, 0.10, 10_000)
    assert 0.015 < small.heldout.shape[0] / 5000 < 0.025
    assert 0.09 < large.heldout.shape[0] / 5000 < 0.11
    assert set(small.heldout.tolist()) <= set(large.heldout.tolist())
    assert set(small.train.tolist()).isdisjoint(small.heldout.tolist())
    assert sorted(small.train.tolist() + small.heldout.tolist()) == list(range(5000))


def test_max_rows_caps_what_is_scored_not_what_is_held_out():
    rows = rows_of(["prose"] * 2000)
    split = split_rows(rows, 0.2, 7)
    assert split.scored.shape[0] == 7 and split.heldout.shape[0] > 300
    values = [split_value(rows.keys[i]) for i in split.heldout]
    assert values == sorted(values)
    assert split.scored.tolist() == split.heldout[:7].tolist()


def test_a_kind_with_too_few_rows_keeps_them_all():
    kinds = ["instruction"] * (MIN_ROWS_PER_KIND - 1) + ["prose"] * MIN_ROWS_PER_KIND
    split = split_rows(rows_of(kinds), 0.5, 100)
    held_kinds = {kinds[i] for i in split.heldout}
    assert held_kinds == {"prose"}
    assert set(range(MIN_ROWS_PER_KIND - 1)) <= set(split.train.tolist())


def test_fraction_zero_and_same_input_same_split():
    rows = rows_of(["source"] * 300)
    assert split_rows(rows, 0.0, 10).heldout.shape[0] == 0
    a, b = split_rows(rows, 0.1, 50), split_rows(rows, 0.1, 50)
    assert a.heldout.tolist() == b.heldout.tolist()


def test_a_file_stays_on_its_side_until_its_content_changes():
    texts = [f"# path: m{i}.py\nx = {i}\n" for i in range(400)]
    before = split_rows(rows_of(["source"] * 400, texts), 0.1, 400)
    held = int(before.heldout[0])
    edited = list(texts)
    edited[held + 1 if held + 1 < 400 else held - 1] += "# edited\n"  # another file changes
    after = split_rows(rows_of(["source"] * 400, edited), 0.1, 400)
    assert held in after.heldout.tolist()


def test_subset_reads_the_chosen_rows():
    rows = rows_of(["prose", "source", "instruction"])
    sub = subset(rows, np.array([2, 0]))
    assert sub.kinds == ["instruction", "prose"] and sub.keys == [rows.keys[2], rows.keys[0]]
    assert sub.read(0).tolist() == rows.read(2).tolist()
    assert subset(rows, np.arange(3)) is rows


def test_the_determinism_golden_document_holds_nothing_out(smollm2_tokenizer):
    """The golden adapter must not change: its document has 2 prose sections and 2 pairs,
    below the per-kind minimum, so every row still trains."""
    from dlm.doc import load_document
    from dlm.rows.build import build_rows
    from dlm.tokenize.plain import PlainRowEncoder

    doc = load_document(REPO / "tests/golden/determinism/golden.dlm")
    rows = PlainRowEncoder(smollm2_tokenizer, "sha256:x").tokenize(build_rows(doc, smollm2_tokenizer).rows)
    split = split_rows(rows, doc.frontmatter.training.eval.fraction, doc.frontmatter.training.eval.max_rows)
    # 2 prose sections, 2 Q/A pairs, 4 prose sentences recast as pairs
    assert split.heldout.shape[0] == 0 and split.train.shape[0] == len(rows) == 8

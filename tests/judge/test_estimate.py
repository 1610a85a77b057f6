"""Many questions to judge: one warning line with an estimate, before judging starts
(`dlm.judge.estimate`, real tokenizer, real row build)."""

from __future__ import annotations

from pathlib import Path

from dlm.judge.estimate import MANY_QUESTIONS, judging_seconds, judging_warning


def probes_doc(count: int) -> str:
    probes = "\n\n".join(
        f"### Q\nWhat is the code of gate {i}?\n\n### A\nGate {i} has code G{i:05d}." for i in range(count)
    )
    return f"""---
dlm_id: 01JG4A6S9Z1B3D5F7H9K1M3P5R
dlm_version: 1
base_model: smollm2-135m
---

The gates of the harbour each have a code.

::probe::

{probes}
"""


def test_the_estimate_is_the_documented_rule() -> None:
    # 120 rows in 2 batches of at most 96, 48 steps each at 0.5 s; 1,000 tokens on 3 models at 4 ms
    assert judging_seconds(40, 1000, 48) == 2 * 48 * 0.5 + 3 * 1000 * 0.004


def test_few_questions_are_not_even_tokenized() -> None:
    def refuse(text: str) -> int:
        raise AssertionError("tokenized")

    assert judging_warning([("q", "a")] * MANY_QUESTIONS, refuse, 48) is None


def notes_of(path: Path, tokenizer) -> list[str]:
    from dlm.actions.evaluating import judging_notes
    from dlm.doc import load_document
    from dlm.rows.build import build_rows

    doc = load_document(path)
    return judging_notes(doc, tokenizer, build_rows(doc, tokenizer).probes)


def test_ten_thousand_probes_get_one_line_with_an_estimate(tmp_path: Path, smollm2_tokenizer) -> None:
    path = tmp_path / "gates.dlm"
    path.write_text(probes_doc(10_000))
    (line,) = notes_of(path, smollm2_tokenizer)
    assert line.startswith("10,000 questions to judge (instruction pairs and probes, ")
    assert " h for SmolLM2-135M on a 2-core CPU" in line and "training.eval.judge: false" in line
    path.write_text(probes_doc(20))
    assert notes_of(path, smollm2_tokenizer) == []

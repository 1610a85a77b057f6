"""`dlm eval --items` shows every reply whole, piped or on a narrow terminal."""

from __future__ import annotations

from dlm.cli.eval_cmd import print_report
from dlm.judge.report import EvalReport, ItemResult, summarize


def test_items_table_keeps_whole_replies_when_piped(capsys, monkeypatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    reply = "The ferry leaves from the north pier at half past two, every day except Sunday, weather permitting."
    item = ItemResult(
        "probe",
        "When and where does the ferry leave?",
        "From the north pier at 2:30.",
        (),
        "doc.dlm:9",
        {"base": "I do not know.", "adapter": reply, "null": "Maybe."},
        {"base": False, "adapter": False, "null": False},
        {"base": -3.0, "adapter": -1.0, "null": -3.1},
    )
    print_report(EvalReport("v0001", summarize([item]), [item], None), items=True)
    out = capsys.readouterr().out
    (row,) = [line for line in out.splitlines() if "When and where" in line]
    assert reply in row and "I do not know." in row and "…" not in out

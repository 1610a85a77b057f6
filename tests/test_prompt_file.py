"""`dlm prompt DOC --file QUESTIONS.txt`: every line answered, in order, one model load."""

import json
from pathlib import Path

from typer.testing import CliRunner

from dlm.cli.main import app

runner = CliRunner()
DOC = "---\ndlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8W\nbase_model: smollm2-135m\n---\n\n# Notes\n\nSome prose.\n"


def test_file_answers_each_line_in_order_as_single_prompts_do(tmp_path: Path, smollm2_ref):
    doc = tmp_path / "doc.dlm"
    doc.write_text(DOC)
    questions = tmp_path / "q.txt"
    questions.write_text("What is 2 + 2?\n\n  Name a colour.  \n")
    args = ["--no-adapter", "--max-new-tokens", "6", "--json"]
    result = runner.invoke(app, ["prompt", str(doc), "--file", str(questions), *args])
    assert result.exit_code == 0, result.output
    answers = json.loads(result.stdout)
    assert [a["question"] for a in answers] == ["What is 2 + 2?", "Name a colour."]
    single = runner.invoke(app, ["prompt", str(doc), "Name a colour.", *args])
    assert json.loads(single.stdout)["answer"] == answers[1]["answer"] != ""


def test_question_and_file_are_exclusive_and_an_empty_file_is_refused(tmp_path: Path):
    doc = tmp_path / "doc.dlm"
    doc.write_text(DOC)
    empty = tmp_path / "q.txt"
    empty.write_text("\n  \n")
    both = runner.invoke(app, ["prompt", str(doc), "hi", "--file", str(empty)])
    assert both.exit_code == 2 and "not both or neither" in both.stderr
    none = runner.invoke(app, ["prompt", str(doc), "--file", str(empty)])
    assert none.exit_code == 1 and f"--file {empty}: no questions in it" in none.stderr


def test_compare_without_a_trained_adapter_is_one_line_and_exit_1(tmp_path: Path, dlm_home, smollm2_ref):
    doc = tmp_path / "doc.dlm"
    doc.write_text(DOC)
    result = runner.invoke(app, ["prompt", str(doc), "hi", "--compare"])
    assert result.exit_code == 1
    assert f"{doc}: no trained adapter yet; run `dlm train {doc}` first" in result.stderr
    assert "--no-adapter" not in result.stderr  # a usage error beside --compare: no way out
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr


def test_a_byte_order_mark_is_not_part_of_the_first_question(tmp_path: Path) -> None:
    from dlm.actions.prompting import read_questions

    path = tmp_path / "questions.txt"
    path.write_bytes("\ufeffWhat is the port?\nAnd the host?\n".encode())
    assert read_questions(path) == ["What is the port?", "And the host?"]

"""`training.synth.teacher`: the lenient reply parser and grounding rule on hand-written
replies, units and keys, the frontmatter keys, and the cache against a real HTTP
endpoint on 127.0.0.1 (a small FastAPI app under uvicorn that answers a fixed reply
and counts requests). tests/serve/test_teacher_serve.py asks a real `dlm serve`."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI, Request
from typer.testing import CliRunner

from dlm.cli.main import app as cli
from dlm.doc import load_document, parse_document
from dlm.errors import DocError, TeacherError
from dlm.rows import teacher as teacher_rules
from dlm.rows.facts.model import Pair
from dlm.rows.teacher import TeacherUnit, grounded, kept_pairs, parse_reply, reply_key, salient_tokens, split_unit
from dlm.rows.teacherstore import fill_teacher_cache
from dlm.serve.server import RunningServer

DOC_ID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"
SECTION = (
    "The ferry daemon listens on port 8080 and keeps 64 MB of journal. "
    "Its configuration lives in `/etc/ferry/ferry.toml`, and uploads go to PostgreSQL."
)
REPLY = """Sure! Here are the pairs:

Q: 1. Which port does the ferry daemon listen on?
A: Port 8080.

**Question 2:** Where does the configuration live?
**Answer:** In `/etc/ferry/ferry.toml`,
the file the daemon reads.

A: an answer without a question
Q: a question without an answer
Q: What is the daemon?
A: A small program that runs in the background.
- Q: Where do uploads go?
- A: To PostgreSQL.
Q: Which port does the ferry daemon listen on?
A: 8080 again (a repeated question)
"""


def test_the_parser_keeps_well_formed_pairs_and_skips_the_rest() -> None:
    assert parse_reply(REPLY) == [
        Pair("Which port does the ferry daemon listen on?", "Port 8080."),
        Pair("Where does the configuration live?", "In `/etc/ferry/ferry.toml`, the file the daemon reads."),
        Pair("What is the daemon?", "A small program that runs in the background."),
        Pair("Where do uploads go?", "To PostgreSQL."),
    ]
    for junk in ("", "no pairs here", "A: lone answer", "Q:\nA: empty question", "Q: x?\nA:   ", "\x00\x01Q"):
        assert parse_reply(junk) == []


def test_an_over_long_field_is_skipped() -> None:
    long = "x " * 400
    assert parse_reply(f"Q: {long}\nA: 8080\nQ: ok?\nA: {long}\nQ: short?\nA: 8080") == [Pair("short?", "8080")]


def test_grounding_keeps_answers_that_share_a_salient_token_of_the_section() -> None:
    unit = TeacherUnit("notes.dlm", 7, SECTION)
    kept = kept_pairs(unit, REPLY, pairs=8)
    assert [p.answer for p in kept] == [
        "Port 8080.",
        "In `/etc/ferry/ferry.toml`, the file the daemon reads.",
        "To PostgreSQL.",
    ]  # "A small program ..." shares no number, identifier or name with the section
    assert kept_pairs(unit, REPLY, pairs=2) == kept[:2]


def test_a_salient_token_counts_as_a_whole_token_or_a_part_of_a_path_never_of_a_word() -> None:
    salient = salient_tokens("The journal lives in `/var/lib/ferry` on port 8080, version 2.1, with PostgreSQL.")
    assert grounded("It is `/var/lib/ferry/journal/x.log`.", salient)
    assert grounded("Port 8080.", salient) and grounded("PostgreSQL", salient)
    assert not grounded("Port 80801.", salient) and not grounded("version 2.10", salient)
    assert not grounded("PostgreSQLish servers", salient) and not grounded("somewhere else", salient)


def test_salient_tokens_are_numbers_identifiers_and_names_inside_a_sentence() -> None:
    salient = salient_tokens(
        "When the cache fills, Ferry asks PostgreSQL. The `max_bytes` is 64 MB, v2.1 in gRPC mode 7."
    )
    assert {"PostgreSQL", "max_bytes", "64", "MB", "v2.1", "gRPC"} <= salient
    assert "When" not in salient  # capitalised only at a sentence's start
    assert "The" not in salient and "7" not in salient  # a weak word; a number of one character
    assert "Ferry" in salient  # a capitalised name inside the sentence


def test_units_split_long_text_at_blank_lines_and_name_their_first_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(teacher_rules, "MAX_UNIT_CHARS", 20)
    units = split_unit("a.md", 5, "\nabc def\nghi\n\njkl mno pqr\n\n" + "x" * 45 + "\nend")
    assert [(u.line, u.text) for u in units] == [
        (6, "abc def\nghi"),
        (9, "jkl mno pqr"),
        (11, "x" * 20),
        (11, "x" * 20),
        (11, "x" * 5 + "\nend"),
    ]
    assert split_unit("a.md", 1, "\n  \n") == []


def teacher_doc(tmp_path: Path, url: str, extra: str = "", body: str = SECTION) -> Path:
    path = tmp_path / "notes.dlm"
    path.write_text(
        f"---\ndlm_id: {DOC_ID}\ntraining:\n  synth:\n    enabled: false\n    teacher:\n"
        f"      url: {url}\n      model: teacher-model\n      pairs: 3\n      max_tokens: 64\n{extra}---\n\n"
        f"{body}\n"
    )
    return path


def test_the_key_names_every_input_but_the_url(tmp_path: Path) -> None:
    config = load_document(teacher_doc(tmp_path, "http://127.0.0.1:9/v1")).frontmatter.training.synth.teacher
    assert config is not None
    unit = TeacherUnit("notes.dlm", 1, SECTION)
    key = reply_key(config, unit)
    assert key.startswith("sha256:") and key == reply_key(config, TeacherUnit("other.md", 9, SECTION))
    assert reply_key(config.model_copy(update={"url": "http://elsewhere/v1"}), unit) == key
    for change in ({"model": "m2"}, {"pairs": 4}, {"temperature": 0.5}, {"max_tokens": 65}):
        assert reply_key(config.model_copy(update=change), unit) != key, change
    assert reply_key(config, TeacherUnit("notes.dlm", 1, SECTION + " ")) != key
    monkey = pytest.MonkeyPatch()
    monkey.setattr(teacher_rules, "PROMPT_VERSION", teacher_rules.PROMPT_VERSION + 1)
    try:
        assert reply_key(config, unit) != key
    finally:
        monkey.undo()


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        ("      url: ftp://x\n      model: m\n", "teacher.url: 'ftp://x' is not an http(s) URL"),
        ("      url: http://x/v1\n      model: m\n      api_key_env: sk-abc123\n", "never the key itself"),
        ("      url: http://x/v1\n", "missing required key 'model'"),
        ("      url: http://x/v1\n      model: m\n      pairs: 0\n", "teacher.pairs"),
        ("      url: http://x/v1\n      model: m\n      temperature: '0.5x'\n", "teacher.temperature"),
        ("      url: http://x/v1\n      model: m\n      key: abc\n", "key"),
    ],
)
def test_frontmatter_errors_name_the_key(lines: str, message: str) -> None:
    text = f"---\ndlm_id: {DOC_ID}\ntraining:\n  synth:\n    teacher:\n{lines}---\nSome text.\n"
    with pytest.raises(DocError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_document(text)


class FakeTeacher:
    """An OpenAI-style chat completions endpoint on 127.0.0.1 answering `reply`."""

    def __init__(self, reply: str, status: int = 200) -> None:
        self.reply, self.status = reply, status
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        api = FastAPI()

        @api.post("/v1/chat/completions")
        async def complete(request: Request) -> Any:
            from fastapi.responses import JSONResponse

            self.requests.append(await request.json())
            self.auth.append(request.headers.get("authorization"))
            body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": self.reply}}]}
            return JSONResponse(body if self.status == 200 else {"error": "no such model"}, status_code=self.status)

        self.app = api


@pytest.fixture
def fake() -> Iterator[tuple[FakeTeacher, str]]:
    teacher = FakeTeacher(REPLY)
    with RunningServer(teacher.app, shutdown_timeout=1.0) as running:
        yield teacher, running.url + "/v1"


def entries(home: Path) -> list[Path]:
    return sorted((home / "teacher").rglob("*.json"))


def test_fetch_fills_the_cache_and_a_warm_listing_asks_nothing(
    fake: tuple[FakeTeacher, str], tmp_path: Path, dlm_home: Path
) -> None:
    teacher, url = fake
    doc = teacher_doc(tmp_path, url)
    cold = CliRunner().invoke(cli, ["synth", str(doc), "--json"])
    assert cold.exit_code == 0, cold.output
    assert json.loads(cold.stdout)["teacher"]["units"][0]["status"] == "missing"
    assert teacher.requests == [] and entries(dlm_home) == []  # without --fetch: no request

    fetched = CliRunner().invoke(cli, ["synth", str(doc), "--fetch", "--json"])
    assert fetched.exit_code == 0, fetched.output
    view = json.loads(fetched.stdout)["teacher"]
    assert view["asked"] == 1 and len(teacher.requests) == 1 and len(entries(dlm_home)) == 1
    stored = json.loads(entries(dlm_home)[0].read_text())
    assert stored["reply"] == REPLY and stored["model"] == "teacher-model"  # as sent, parsed on each read
    sent = teacher.requests[0]
    assert sent["model"] == "teacher-model" and sent["max_tokens"] == 64 and sent["temperature"] == 0
    assert SECTION in sent["messages"][-1]["content"] and "3 question" in sent["messages"][-1]["content"]
    assert view["units"] == [
        {
            "where": "notes.dlm:13",
            "status": "cached",
            "dropped": 1,
            "pairs": [
                {"question": "Which port does the ferry daemon listen on?", "answer": "Port 8080."},
                {
                    "question": "Where does the configuration live?",
                    "answer": "In `/etc/ferry/ferry.toml`, the file the daemon reads.",
                },
                {"question": "Where do uploads go?", "answer": "To PostgreSQL."},
            ],
        }
    ]
    teacher.reply = "Q: changed?\nA: 8080"  # a second request would show
    again = CliRunner().invoke(cli, ["synth", str(doc), "--fetch", "--json"])
    assert json.loads(again.stdout)["teacher"]["units"] == view["units"]
    assert len(teacher.requests) == 1
    shown = CliRunner().invoke(cli, ["show", str(doc), "--json"])
    assert json.loads(shown.stdout)["rows"]["teacher_pairs"] == 3
    assert "teacher 3 Q/A" in CliRunner().invoke(cli, ["show", str(doc)], env={"COLUMNS": "200"}).stdout


def test_an_api_key_is_read_from_the_named_variable(
    fake: tuple[FakeTeacher, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    teacher, url = fake
    doc = load_document(teacher_doc(tmp_path, url, "      api_key_env: TEACHER_TEST_KEY\n"))
    monkeypatch.delenv("TEACHER_TEST_KEY", raising=False)
    with pytest.raises(TeacherError, match=r"\$TEACHER_TEST_KEY is not set"):
        fill_teacher_cache(doc)
    monkeypatch.setenv("TEACHER_TEST_KEY", "s3cret")
    assert fill_teacher_cache(doc).asked == 1
    assert teacher.auth == ["Bearer s3cret"]


def test_an_http_error_is_one_line_and_writes_nothing(tmp_path: Path, dlm_home: Path) -> None:
    teacher = FakeTeacher(REPLY, status=404)
    with RunningServer(teacher.app, shutdown_timeout=1.0) as running:
        result = CliRunner().invoke(cli, ["synth", str(teacher_doc(tmp_path, running.url + "/v1")), "--fetch"])
    assert result.exit_code == 1
    progress, error = result.output.strip().splitlines()  # the request announced, then one error line
    assert progress == "asking the teacher about notes.dlm:13"
    assert error.startswith("error: ") and "answered HTTP 404 for notes.dlm:13" in error
    assert entries(dlm_home) == []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_teacher_with_a_cold_cache_is_one_line_and_exit_1(tmp_path: Path, dlm_home: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    doc = teacher_doc(tmp_path, url)
    result = CliRunner().invoke(cli, ["synth", str(doc), "--fetch"])
    assert result.exit_code == 1
    progress, line = result.output.strip().splitlines()  # the request announced, then one error line
    assert progress == "asking the teacher about notes.dlm:13" and line.startswith("error: ")
    assert url in line and "notes.dlm:13" in line and "start the server" in line
    assert "remove training.synth.teacher" in line
    assert entries(dlm_home) == []
    # reading without --fetch never connects: the listing says what is missing
    listed = CliRunner().invoke(cli, ["synth", str(doc)])
    assert listed.exit_code == 0 and "not asked yet" in listed.output
    shown = json.loads(CliRunner().invoke(cli, ["show", str(doc), "--json"]).stdout)
    assert shown["rows"]["teacher_pairs"] == 0 and shown["rows"]["teacher_unasked"] == 1
    assert any("1 section(s) not asked yet (first notes.dlm:13)" in note for note in shown["notes"])
    assert entries(dlm_home) == []


def test_dlm_train_asks_the_teacher_before_training(tmp_path: Path, dlm_home: Path, smollm2_ref: Any) -> None:
    unreachable = teacher_doc(tmp_path, f"http://127.0.0.1:{free_port()}/v1")
    failed = CliRunner().invoke(cli, ["train", str(unreachable)])
    assert failed.exit_code == 1, failed.output
    assert "start the server" in failed.output and "notes.dlm:13" in failed.output
    assert not list(dlm_home.glob("store/*/adapter/versions/*"))  # asked before any training

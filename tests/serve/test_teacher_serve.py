"""`training.synth.teacher` against a real `dlm serve` process serving SmolLM2 on
127.0.0.1: `dlm synth --fetch` fills the cache; with the server stopped, the same
listing and the same training rows come back byte for byte from the cache alone."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_serve_e2e import start_serve, stop
from typer.testing import CliRunner
from ulid import ULID

from dlm.cli.main import app as cli
from dlm.doc import load_document, new_document
from dlm.rows.build import build_rows

pytestmark = pytest.mark.integration

SECTION = "The ferry daemon listens on port 8080. Its journal lives in `/var/lib/ferry/journal`."
GUIDE = "# Guide\n\nFerry uploads each journal to PostgreSQL every 30 seconds.\n"


def write_teacher_doc(folder: Path, url: str, model: str) -> Path:
    (folder / "docs").mkdir()
    (folder / "docs" / "guide.md").write_text(GUIDE)
    path = folder / "notes.dlm"
    path.write_text(
        f"---\ndlm_id: {ULID()}\nbase_model: smollm2-135m\ntraining:\n  sources:\n    - path: docs\n  synth:\n    enabled: false\n    teacher:\n"
        f"      url: {url}\n      model: {model}\n      pairs: 2\n      max_tokens: 64\n---\n\n{SECTION}\n"
    )
    return path


def synth(*args: str) -> Any:
    result = CliRunner().invoke(cli, ["synth", *args])
    assert result.exit_code == 0, result.output
    return result


def test_a_real_dlm_serve_teaches_once_and_the_cache_replays_it(
    tmp_path: Path, dlm_home: Path, smollm2_tokenizer: Any
) -> None:
    served = tmp_path / "served"
    served.mkdir()
    (served / "teacher.dlm").write_text(new_document())
    proc, url = start_serve([str(served / "teacher.dlm"), "--no-adapter"])
    try:
        model = httpx.get(url + "/v1/models", timeout=30).json()["data"][0]["id"]
        doc = write_teacher_doc(tmp_path, url + "/v1", model)
        fetched = json.loads(synth(str(doc), "--fetch", "--json").stdout)["teacher"]
        assert fetched["asked"] == 2 and [u["status"] for u in fetched["units"]] == ["cached", "cached"]
        assert [u["where"] for u in fetched["units"]][1] == "guide.md:1"
        warm_json = synth(str(doc), "--json").stdout
        warm_text = synth(str(doc)).stdout
    finally:
        stop(proc)
    assert proc.poll() is not None  # nothing answers at the URL any more
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/v1/models", timeout=5)

    assert len(list((dlm_home / "teacher").rglob("*.json"))) == 2
    assert synth(str(doc), "--json").stdout == warm_json  # byte for byte, from the cache alone
    assert synth(str(doc)).stdout == warm_text
    again = json.loads(synth(str(doc), "--fetch", "--json").stdout)["teacher"]
    assert again["asked"] == 0 and again["units"] == fetched["units"]

    loaded = load_document(doc)
    first = build_rows(loaded, smollm2_tokenizer)
    second = build_rows(loaded, smollm2_tokenizer)
    teacher_rows = [r for r in first.rows.text_rows if r.origin.endswith("(teacher)")]
    pairs = sum(len(u["pairs"]) for u in fetched["units"])
    assert pairs >= 1  # the served model wrote at least one grounded pair
    assert first.teacher_pairs == len(teacher_rows) == pairs
    assert first.rows.text_rows == second.rows.text_rows
    for row, qa in zip(teacher_rows, [p for u in fetched["units"] for p in u["pairs"]], strict=True):
        assert qa["question"] in row.prompt_text and row.text.startswith(row.prompt_text)
        assert qa["answer"] in row.text[len(row.prompt_text) :]
    shown = json.loads(CliRunner().invoke(cli, ["show", str(doc), "--json"]).stdout)
    assert shown["rows"]["teacher_pairs"] == pairs and shown["rows"]["teacher_unasked"] == 0

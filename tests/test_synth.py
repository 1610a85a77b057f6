"""`training.synth`: Q/A pairs and probes drawn from Python sources (`dlm.rows.synth`),
their memo, and the rows they become (real tokenizer, real section cache)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlm.rows.synth import (
    MAX_PHRASINGS,
    file_facts,
    first_sentence,
    phrase,
    probe_keys,
    synthesize,
    wanted_file,
)
from dlm.rows.synthmemo import FactMemo, source_facts
from dlm.rows.types import FileRow

STDLIB = Path(sysconfig.get_paths()["stdlib"])

SNIPPET = '''"""A widget module."""
from typing import overload

MAX_WIDGETS = 64
DEFAULT_NAME: str = "widget"
_PRIVATE_LIMIT = 3
table = {}


class WidgetRegistry:
    """Maps names to widgets, e.g. buttons. More text here."""

    def __init__(self, capacity: int = 8):
        self.by_name = {}

    def add(self, name: str, widget) -> None:
        """Register `widget` under ``name``."""

    def _evict(self):
        pass

    def __len__(self):
        return len(self.by_name)

    @property
    def size(self):
        """How many widgets are registered."""
        return len(self.by_name)

    @staticmethod
    def check(name):
        pass

    def close(self):
        """Close the registry."""

    def forward(self, *args, **kwargs):
        pass

    class Inner:
        pass


def find_widget(registry, name, *, default=None):
    """Look a widget up by name:

    - one
    """


@overload
def parse(x: int) -> int: ...
def parse(x):
    """Parse :class:`Widget` specs from text!  Then more."""


def _helper():
    """Private."""
'''


def facts_of(relpath: str = "widgets/registry.py", text: str = SNIPPET):
    return {(f.kind, f.name): f for f in file_facts(relpath, text)}


def test_snippet_facts_by_kind():
    got = facts_of()
    assert set(got) == {
        ("where", "MAX_WIDGETS"),
        ("value", "MAX_WIDGETS"),
        ("where", "DEFAULT_NAME"),
        ("value", "DEFAULT_NAME"),
        ("where", "WidgetRegistry"),
        ("purpose", "WidgetRegistry"),
        ("signature", "WidgetRegistry"),
        ("purpose", "WidgetRegistry.add"),
        ("signature", "WidgetRegistry.add"),
        ("purpose", "WidgetRegistry.size"),
        ("signature", "WidgetRegistry.check"),
        ("purpose", "WidgetRegistry.close"),  # no signature: nothing to pass, nothing returned
        ("where", "find_widget"),
        ("signature", "find_widget"),
        ("where", "parse"),
        ("purpose", "parse"),
        ("signature", "parse"),
    }
    assert got["where", "WidgetRegistry"].answer == "widgets/registry.py"
    assert got["where", "WidgetRegistry"].line == 10
    assert got["value", "MAX_WIDGETS"].answer == "64"
    assert got["value", "DEFAULT_NAME"].answer == "'widget'"
    assert probe_keys(got["value", "DEFAULT_NAME"]) == ("widget",) and probe_keys(got["value", "MAX_WIDGETS"]) == (
        "64",
    )
    assert probe_keys(got["signature", "find_widget"]) == ("registry", "name", "default")
    assert probe_keys(got["where", "parse"]) == ("widgets/registry.py",) and probe_keys(got["purpose", "parse"]) == ()
    assert probe_keys(got["signature", "parse"]) == ()  # `x` would match any answer
    assert got["purpose", "WidgetRegistry"].answer == "Maps names to widgets, e.g. buttons."
    assert got["purpose", "WidgetRegistry.add"].answer == "Register `widget` under `name`."
    assert got["purpose", "parse"].answer == "Parse `Widget` specs from text!"
    assert got["signature", "WidgetRegistry"].answer == "WidgetRegistry(capacity: int=8)"
    assert got["signature", "WidgetRegistry.add"].answer == "add(name: str, widget) -> None"
    assert got["signature", "WidgetRegistry.check"].answer == "check(name)"  # static: nothing dropped
    assert got["signature", "find_widget"].answer == "find_widget(registry, name, *, default=None)"
    assert got["signature", "parse"].answer == "parse(x)"  # the implementation, not the @overload stub
    assert {f.subject for f in got.values() if f.name.startswith("WidgetRegistry")} == {"WidgetRegistry"}


def test_first_sentence_rules():
    assert first_sentence("Return the sum, i.e. the total. Then more.") == "Return the sum, i.e. the total."
    assert first_sentence("Compute\n    things over   lines\n\nSecond paragraph.") == "Compute things over lines."
    assert first_sentence("Options are:\n\n- a") is None  # announces a list
    assert first_sentence("renames(old, new)\n\nSuper-rename.") is None  # an old signature line
    assert first_sentence("See :func:`~os.path.join` and ``x``.") == "See `os.path.join` and `x`."
    assert first_sentence("Short.") is None and first_sentence("word " * 60) is None


@pytest.mark.parametrize(
    "relpath, wanted",
    [
        ("json/decoder.py", True),
        ("json/__init__.py", True),
        ("setup.py", True),
        ("README.md", False),
        ("json/decoder.pyi", False),
        ("test/test_json.py", False),
        ("pkg/tests/helpers.py", False),
        ("test_x.py", False),
        ("x_test.py", False),
        ("conftest.py", False),
        ("idlelib/idle_test/mock.py", False),
        ("_pydecimal.py", False),
        ("_private/__init__.py", False),
        ("pkg/__main__.py", False),
    ],
)
def test_wanted_files(relpath: str, wanted: bool):
    assert wanted_file(relpath) is wanted
    assert bool(file_facts(relpath, "def visible(a):\n    pass\n")) is wanted


def test_a_syntax_error_gives_no_facts():
    assert file_facts("broken.py", "def f(:\n") == []
    assert file_facts("nul.py", "x = 1\0") == []


def test_json_decoder_from_the_stdlib():
    got = facts_of("json/decoder.py", (STDLIB / "json" / "decoder.py").read_text())
    assert got["where", "JSONDecoder"].answer == "json/decoder.py"
    assert got["purpose", "JSONDecoder.decode"].answer.startswith("Return the Python representation of `s`")
    assert got["signature", "JSONDecoder.raw_decode"].answer == "raw_decode(s, idx=0)"
    pairs = phrase(got["where", "JSONDecoder"])
    assert len(pairs) == MAX_PHRASINGS and len({p.question for p in pairs}) == MAX_PHRASINGS
    assert pairs[0].question == "Where is `JSONDecoder` defined?" and pairs[0].answer == "In `json/decoder.py`."
    assert all("json/decoder.py" in p.answer for p in pairs)


def stdlib_facts(*packages: str) -> list:
    facts = []
    for package in packages:
        for path in sorted((STDLIB / package).rglob("*.py")):
            rel = path.relative_to(STDLIB).as_posix()
            facts += file_facts(rel, path.read_text(encoding="utf-8"))
    return facts


def test_email_package_drops_ambiguous_where_facts():
    facts = stdlib_facts("email")
    where = [f for f in facts if f.kind == "where"]
    names = [f.name for f in where]
    twice = {n for n in names if names.count(n) > 1}
    assert twice  # e.g. a helper defined in two email modules
    drawn = synthesize(facts, probe_share=0.0, phrasings=1)
    kept_where = {f.name for f, _ in drawn.train if f.kind == "where"}
    assert not kept_where & twice and kept_where == set(names) - twice
    assert ("where", "email/message.py", "Message") in {(f.kind, f.path, f.name) for f, _ in drawn.train}


def test_probe_split_is_per_definition_and_disjoint():
    drawn = synthesize(stdlib_facts("json", "email"), probe_share=0.25, phrasings=3)
    train_subjects = {(f.path, f.subject) for f, _ in drawn.train}
    probe_subjects = {(f.path, f.subject) for f, _, _ in drawn.probes}
    assert drawn.probes and drawn.train and not train_subjects & probe_subjects
    assert 0.1 < len(probe_subjects) / len(train_subjects | probe_subjects) < 0.4
    train_questions = {p.question for _, p in drawn.train}
    assert not train_questions & {p.question for _, p, _ in drawn.probes}
    per_fact: dict = {}
    for f, p in drawn.train:
        per_fact.setdefault(f, []).append(p)
    assert all(len(ps) == 3 for ps in per_fact.values())  # all phrasings of a fact on one side
    for fact, pair, keys in drawn.probes:
        assert pair == phrase(fact, 1)[0]
        assert all(k in pair.answer for k in keys)
        if fact.kind == "where":
            assert keys == (fact.path,)


def test_probe_side_of_a_definition_does_not_depend_on_other_files():
    small = synthesize(stdlib_facts("json"), probe_share=0.3)
    large = synthesize(stdlib_facts("json", "email"), probe_share=0.3)
    side = {f: "probe" for f, _, _ in large.probes} | {f: "train" for f, _ in large.train}
    for fact, _, _ in small.probes:
        assert side[fact] == "probe"
    for fact, _ in small.train:
        assert side[fact] == "train"


def test_max_facts_is_a_nested_hash_sample():
    facts = stdlib_facts("json", "email")
    full = synthesize(facts, probe_share=0.0, phrasings=1)
    few = synthesize(facts, probe_share=0.0, phrasings=1, max_facts=40)
    more = synthesize(facts, probe_share=0.0, phrasings=1, max_facts=120)
    assert few.facts == 40 and more.facts == 120 and full.facts > 120
    assert {f for f, _ in few.train} < {f for f, _ in more.train} < {f for f, _ in full.train}
    assert synthesize(facts, kinds=["where"], probe_share=0.0).train[0][0].kind == "where"
    assert {f.kind for f, _ in synthesize(facts, kinds=["value"], probe_share=0.0).train} == {"value"}


def dump(drawn) -> str:
    return json.dumps(
        [[f.kind, f.path, f.line, p.question, p.answer] for f, p in drawn.train]
        + [[f.kind, f.path, p.question, list(k)] for f, p, k in drawn.probes]
    )


def test_same_facts_in_any_order_give_the_same_pairs():
    facts = stdlib_facts("json", "email")
    assert dump(synthesize(facts, max_facts=300)) == dump(synthesize(facts[::-1], max_facts=300))


def test_pairs_are_byte_identical_across_hash_seeds():
    script = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_synth as t; "
        "print(t.dump(t.synthesize(t.stdlib_facts('json', 'email'), max_facts=300)))"
    )
    outs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", script, str(Path(__file__).parent)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        outs.append(run.stdout)
    assert outs[0] == outs[1] == dump(synthesize(stdlib_facts("json", "email"), max_facts=300)) + "\n"


def file_rows(root: Path) -> list[FileRow]:
    rows = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            st = path.stat()
            rows.append(
                FileRow(
                    0,
                    str(path),
                    path.relative_to(root).as_posix(),
                    st.st_size,
                    st.st_mtime_ns,
                    st.st_ctime_ns,
                    st.st_ino,
                    100_000,
                )
            )
    return rows


def test_memo_parses_a_file_once_and_again_when_it_changes(tmp_path: Path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.py").write_text("def alpha(x):\n    '''Return alpha of x.'''\n")
    (src / "b.bin.py").write_bytes(b"\0\0binary")  # binary: skipped by the read rules
    (src / "notes.txt").write_text("def not_python(): pass\n")
    memo_path = tmp_path / "memo.json"
    first = source_facts(file_rows(src), FactMemo(memo_path))
    assert {(f.kind, f.name) for f in first} == {("where", "alpha"), ("purpose", "alpha"), ("signature", "alpha")}
    assert memo_path.exists()

    def no_parse(*args):
        raise AssertionError("parsed although remembered")

    monkeypatch.setattr("dlm.rows.synthmemo.parsed_facts", no_parse)
    memo = FactMemo(memo_path)
    assert source_facts(file_rows(src), memo) == first and not memo.dirty
    monkeypatch.undo()
    (src / "a.py").write_text("def beta(y):\n    pass\n")
    assert {f.name for f in source_facts(file_rows(src), FactMemo(memo_path))} == {"beta"}
    memo_path.write_text("{not json")
    assert source_facts(file_rows(src), FactMemo(memo_path))[0].name == "beta"  # damaged: reparsed


DOC = """---
dlm_id: 01JDSYNTH00000000000000000
dlm_version: 1
base_model: smollm2-135m
system_prompt: Answer briefly.
training:
  sequence_len: 64
  synth:
    enabled: {enabled}
    probe_share: 0.3
  recast: false  # only the synth pairs beside the document's own rows
  sources:
    - path: src
      include: ["**/*.py"]
---

Widgets live in a registry.

::instruction::

### Q
Where are widgets kept?

### A
In the registry.
"""


@pytest.fixture
def synth_doc(tmp_path: Path) -> Path:
    src = tmp_path / "src" / "widgets"
    src.mkdir(parents=True)
    (src / "registry.py").write_text(SNIPPET)
    (src / "colors.py").write_text('RED = "#ff0000"\n\n\ndef blend(a, b, weight=0.5):\n    """Mix two colors."""\n')
    path = tmp_path / "widgets.dlm"
    path.write_text(DOC.replace("{enabled}", "true"))
    return path


def test_build_rows_renders_synth_pairs_with_the_chat_template(synth_doc: Path, smollm2_tokenizer):
    from dlm.doc import load_document
    from dlm.rows.build import build_rows

    built = build_rows(load_document(synth_doc), smollm2_tokenizer)
    synth_rows = [r for r in built.rows.text_rows if r.origin.endswith(" (synth)")]
    assert synth_rows and all(r.kind == "synth" for r in synth_rows)
    assert built.synth_pairs == len(synth_rows)
    assert built.rows.text_rows[0].kind == "prose" and not built.rows.text_rows[1].origin.endswith("(synth)")
    for row in synth_rows:
        assert row.prompt_text and row.text.startswith(row.prompt_text)
        assert "Answer briefly." in row.prompt_text and "<|im_start|>assistant" in row.prompt_text
    origins = {r.origin for r in synth_rows} | {p.origin for p in built.probes}
    assert "widgets/registry.py:10 (synth)" in origins and "widgets/colors.py:4 (synth)" in origins
    assert built.probes and all(p.origin.endswith(" (synth)") for p in built.probes)
    trained = "".join(r.text for r in synth_rows)
    assert not any(p.question in trained for p in built.probes)

    synth_doc.write_text(DOC.replace("{enabled}", "false"))
    off = build_rows(load_document(synth_doc), smollm2_tokenizer)
    assert len(off.rows.text_rows) == 2 and off.probes == () and off.synth_pairs == 0


def test_synth_rows_go_through_the_section_cache(synth_doc: Path, smollm2_ref):
    from dlm.actions.cache import cache_build

    first = cache_build(synth_doc)
    second = cache_build(synth_doc)
    assert first.misses >= first.rows > 20  # 2 in-body rows, 2 files, the synth pairs
    assert second.rows == first.rows and second.hits == second.rows and second.misses == 0


def test_show_counts_synth_pairs_and_shows_their_tokens(synth_doc: Path, smollm2_tokenizer):
    from dlm.cli.main import app
    from dlm.doc import load_document
    from dlm.rows.build import build_rows

    runner = CliRunner()
    result = runner.invoke(app, ["show", str(synth_doc), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    assert rows["instruction"] == 1 and rows["source_files"] == 2
    assert rows["synth_pairs"] > 0 and rows["synth_probes"] > 0
    text = runner.invoke(app, ["show", str(synth_doc)])
    shown = " ".join(text.output.split())  # the table wraps long cells
    assert f"{rows['synth_pairs']} synth Q/A ({rows['synth_probes']} probes held out)" in shown

    built = build_rows(load_document(synth_doc), smollm2_tokenizer)
    first = next(r for r in built.rows.text_rows if r.origin.endswith(" (synth)"))
    selector = first.origin.removesuffix(" (synth)")
    tokens = runner.invoke(app, ["show", str(synth_doc), "--json", "--tokens", selector, "--limit", "400"])
    assert tokens.exit_code == 0, tokens.output
    view = json.loads(tokens.output)
    assert view["kind"] == "synth" and view["source"] == first.origin
    assert "".join(t["text"] for t in view["tokens"]) == first.text
    assert 0 < view["n_prompt"] < view["n_tokens"]


def _constants_tree(root: Path, files: int, constants_per_file: int) -> list[FileRow]:
    for i in range(files):
        lines = [f"LIMIT_{i}_{k} = {i * 100 + k}\n" for k in range(constants_per_file)]
        (root / f"mod{i}.py").write_text("".join(lines) + "\n\ndef helper(x):\n    return x\n")
    return file_rows(root)


def test_auto_states_where_names_live_and_constants_values_in_several_phrasings(tmp_path: Path):
    from dlm.doc.schema import SynthConfig
    from dlm.rows.build import AUTO_SYNTH, drawn_synth

    files = _constants_tree(tmp_path, files=3, constants_per_file=2)
    drawn = drawn_synth(SynthConfig(), files)
    assert drawn is not None and drawn.probes == []  # the document's own probes judge
    values = {qa.question for fact, qa in drawn.train if fact.kind == "value"}
    assert {f"What is the value of `LIMIT_{i}_{k}` in `mod{i}.py`?" for i in range(3) for k in range(2)} <= values
    assert len(values) == 6 * SynthConfig().phrasings
    assert {fact.kind for fact, _ in drawn.train} <= set(AUTO_SYNTH.kinds)  # no purpose or signature pairs
    # the same tree under `enabled: true` draws every kind
    full = drawn_synth(SynthConfig(enabled=True), files)
    assert full is not None and {f.kind for f, _ in full.train} > {f.kind for f, _ in drawn.train}
    assert drawn_synth(SynthConfig(enabled=False), files) is None


def test_past_the_bound_the_documents_own_facts_are_kept_first(tmp_path: Path):
    """The cap keeps what the document's author wrote before any source's fact; the hash
    sample fills the rest."""
    from dlm.doc.schema import SynthConfig
    from dlm.rows.build import AUTO_SYNTH, drawn_synth
    from dlm.rows.facts.prose import prose_facts

    crowded = _constants_tree(tmp_path, files=1, constants_per_file=AUTO_SYNTH.max_facts)
    prose = " ".join(f"The relay number {i} listens on port {8000 + i}." for i in range(12))
    document = prose_facts("doc.dlm", prose)
    assert len(document) >= 12
    drawn = drawn_synth(SynthConfig(), crowded, document=document)
    assert drawn is not None
    kept = {(f.kind, f.path, f.name) for f, _ in drawn.train}
    assert len(kept) == AUTO_SYNTH.max_facts
    assert {(f.kind, f.path, f.name) for f in document} <= kept


def test_auto_samples_past_its_fact_bound_and_reads_only_the_document_past_its_file_bound(tmp_path: Path, monkeypatch):
    from dlm.doc.schema import SynthConfig
    from dlm.rows import build
    from dlm.rows.build import AUTO_SYNTH, drawn_synth
    from dlm.rows.facts.prose import prose_facts

    many_constants = tmp_path / "constants"
    many_constants.mkdir()
    crowded = _constants_tree(many_constants, files=1, constants_per_file=AUTO_SYNTH.max_facts)
    drawn = drawn_synth(SynthConfig(), crowded)
    assert drawn is not None
    assert len({(f.kind, f.name) for f, _ in drawn.train}) == AUTO_SYNTH.max_facts  # a sample, not all

    # a large tree is not read at all: the document's own facts are still stated
    big = tmp_path / "big"
    big.mkdir()
    tree = _constants_tree(big, files=AUTO_SYNTH.max_files + 1, constants_per_file=1)
    original = build.synth_set

    def unread(config, files, remember=True, document=()):
        assert not [f for f in files if f.relpath.endswith(".py")], "parsed code past max_files"
        return original(config, files, remember, document)

    monkeypatch.setattr(build, "synth_set", unread)
    assert drawn_synth(SynthConfig(), tree) is None
    document = prose_facts("doc.dlm", "The relay listens on port 8125.")
    drawn = drawn_synth(SynthConfig(), tree, document=document)
    assert drawn is not None and {f.path for f, _ in drawn.train} == {"doc.dlm"}
    assert any("65 code files, over auto's 64" in note for note in drawn.notes)
    assert drawn_synth(SynthConfig(enabled=False), tree, document=document) is None
    # its README is read; tests do not count toward the bound
    (big / "README.md").write_text("The relay keeps 12 spools.\n")
    drawn = drawn_synth(SynthConfig(), file_rows(big), document=document)
    assert drawn is not None and {f.path for f, _ in drawn.train} == {"doc.dlm", "README.md"}
    (big / "tests").mkdir()
    for i in range(AUTO_SYNTH.max_files):
        (big / f"mod{i}.py").rename(big / "tests" / f"test_{i}.py")
    monkeypatch.setattr(build, "synth_set", original)
    small = drawn_synth(SynthConfig(), file_rows(big))
    assert small is not None and "mod64.py" in {f.path for f, _ in small.train} and not small.notes


def test_a_constant_bound_twice_is_what_its_last_binding_says():
    got = facts_of("cfg.py", "TIMEOUT = 10\nRETRIES = 3\nTIMEOUT = 30\nRETRIES += 1\n")
    assert got["value", "TIMEOUT"].answer == "30" and got["value", "TIMEOUT"].line == 3
    assert ("value", "RETRIES") not in got  # its last binding is not a literal
    assert got["where", "RETRIES"].line == 4


def test_probe_keys_are_never_one_character_or_a_common_word():
    facts = facts_of("cfg.py", "SEP = 'a'\nDEBUG = 0\nFLAG = True\nNAME = 'no'\nPORT = 8080\n")
    for name in ("SEP", "DEBUG", "FLAG", "NAME"):
        assert probe_keys(facts["value", name]) == ()
    assert probe_keys(facts["value", "PORT"]) == ("8080",)
    drawn = synthesize(facts.values(), kinds=["value"], probe_share=0.999)
    assert [fact.name for fact, _, _ in drawn.probes] == ["PORT"]  # no probe any reply would pass


def test_a_file_too_deep_to_parse_is_skipped_with_one_line(tmp_path: Path):
    from dlm.rows.synth import parsed_facts

    deep = "TOTAL = " + " + ".join(["1"] * 5000) + "\n"
    assert parsed_facts("deep.py", deep) == "nested too deeply to parse"
    assert file_facts("deep.py", deep) == []
    src = tmp_path / "src"
    src.mkdir()
    (src / "deep.py").write_text(deep)
    (src / "ok.py").write_text("PORT = 8080\n")
    for memo in (None, FactMemo(tmp_path / "memo.json"), FactMemo(tmp_path / "memo.json")):  # parsed, then read
        notes: list[str] = []
        facts = source_facts(file_rows(src), memo, notes)
        assert {f.name for f in facts} == {"PORT"}
        assert notes == ["deep.py: not parsed (nested too deeply to parse); training.synth draws no facts from it"]


def test_show_names_a_file_synth_cannot_parse(synth_doc: Path):
    from dlm.cli.main import app

    (synth_doc.parent / "src" / "widgets" / "deep.py").write_text("X = " + " + ".join(["1"] * 5000) + "\n")
    result = CliRunner().invoke(app, ["show", str(synth_doc)])
    assert result.exit_code == 0, result.output
    assert "widgets/deep.py: not parsed (nested too deeply to parse)" in " ".join(result.stderr.split())


def test_a_comment_right_above_a_constant_is_what_its_value_is_asked_by():
    from dlm.rows.synth import parsed_facts

    text = "import os\n\n# How many failed fetches in a row mute a feed.\nMUTE_AFTER = 23\n\nPLAIN = 7\n"
    got = parsed_facts("tarnwick/harvest.py", text)
    assert isinstance(got, list)
    assert [(f.kind, f.name, f.answer) for f in got if f.kind in ("value", "purpose")] == [
        ("value", "MUTE_AFTER", "23"),
        ("purpose", "MUTE_AFTER", "How many failed fetches in a row mute a feed."),
        ("value", "PLAIN", "7"),  # a blank line above: no comment of its own
    ]
    pairs = synthesize(got, kinds=("value",), phrasings=2, probe_share=0).train
    assert [p.question for _, p in pairs] == [
        "What is the value of `MUTE_AFTER` in `tarnwick/harvest.py`?",
        "How many failed fetches in a row mute a feed?",
        "What is the value of `PLAIN` in `tarnwick/harvest.py`?",
        "What is the plain?",
    ]


def test_one_sentence_stated_twice_trains_once_and_no_trimmed_question_has_two_answers():
    from dlm.rows.facts.prose import prose_facts

    readme = prose_facts("README.md", "The status page listens on port 9462.\n")
    doc = prose_facts("doc.dlm", "The status page listens on port 9462.\n")
    drawn = synthesize([*readme, *doc], kinds=["statement"], phrasings=2, probe_share=0.0)
    questions = [p.question for _, p in drawn.train]
    assert questions == ["On which port does the status page listen?", "What do you know about the status page?"]
    # trimmed, both would ask "The feed is polled every how many seconds?" toward 30 and toward 60
    text = "The feed is polled every 30 seconds when it is new. The feed is polled every 60 seconds while it is old.\n"
    drawn = synthesize(prose_facts("README.md", text), kinds=["statement"], phrasings=1, probe_share=0.0)
    assert [p.question for _, p in drawn.train] == [
        "The feed is polled every how many seconds when it is new?",
        "The feed is polled every how many seconds while it is old?",
    ]

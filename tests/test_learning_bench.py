"""The learning benchmark's documents say what their `expect.json` says they say, and
`benchmarks/learning.py` reads a saved run right; no training here.

A reworded probe must be answerable from its pair (its keys are in the pair's answer);
a fact probe's keys must be written in the one place `expect.json` names (the `.dlm`
prose, Markdown in the sources, code, config) and in none of the others, nor in any
instruction pair, or the benchmark would not measure what its table says it measures.
Keys are found by the judge's own rule (`dlm.judge.match.key_found`).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from dlm.doc import InstructionSection, ProbeSection, ProseSection, TrainingConfig, load_document
from dlm.judge.match import key_found
from dlm.rows.walk import walk_sources

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "learning.py"
DOCS = ROOT / "benchmarks" / "learning"
UNSEEN = ROOT / "benchmarks" / "unseen"  # written after the recipe was settled: judged, never tuned on
NAMES = sorted(p.parent.name for p in DOCS.glob("*/expect.json"))
EVERY = [(DOCS, n) for n in NAMES] + [(UNSEEN, p.parent.name) for p in sorted(UNSEEN.glob("*/expect.json"))]
FIXTURE = Path(__file__).parent / "fixtures" / "learning"
CODE = {
    "python": (".py",),
    "go": (".go",),
    "rust": (".rs",),
    "typescript": (".ts",),
    "c": (".c", ".h"),
    "java": (".java",),
    "cpp": (".cc", ".cpp", ".hh", ".hpp"),
    "javascript": (".js", ".mjs"),
}
CONFIG = (".yaml", ".yml", ".toml", ".json", ".ini")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


learning = _load("benchmark_learning_under_test")


def _texts(root: Path, name: str, language: str) -> dict[str, str]:
    """The text of each place a fact can be written: the `.dlm` prose, and the files
    `training.sources` takes, by kind."""
    doc = load_document(root / name / f"{name}.dlm")
    texts = {"prose": "\n\n".join(s.text for s in doc.sections if isinstance(s, ProseSection))}
    files = walk_sources(doc.frontmatter.training.sources, root / name).files
    kinds = {"readme": (".md", ".rst", ".txt"), "code": CODE[language], "config": CONFIG}
    for kind, suffixes in kinds.items():
        texts[kind] = "\n\n".join(Path(f.path).read_text(encoding="utf-8") for f in files if f.path.endswith(suffixes))
    return texts


def test_six_documents_in_six_languages() -> None:
    languages = [json.loads((DOCS / n / "expect.json").read_text())["language"] for n in NAMES]
    assert sorted(languages) == sorted(set(CODE) - {"cpp", "javascript"})
    ids = {load_document(root / n / f"{n}.dlm").frontmatter.dlm_id for root, n in EVERY}
    assert len(ids) == len(EVERY) and len(NAMES) == 6 and len(EVERY) > 6


@pytest.mark.parametrize(("root", "name"), EVERY)
def test_document_shape(root: Path, name: str) -> None:
    doc = load_document(root / name / f"{name}.dlm")
    front = doc.frontmatter
    assert front.base_model == "smollm2-135m" and front.system_prompt
    assert front.training.model_fields_set == {"sources"}, "every training setting but sources at its default"
    defaults = TrainingConfig().model_dump(exclude={"sources"})
    assert front.training.model_dump(exclude={"sources"}) == defaults
    pairs = [p for s in doc.sections if isinstance(s, InstructionSection) for p in s.pairs]
    probes = [p for s in doc.sections if isinstance(s, ProbeSection) for p in s.pairs]
    assert len(pairs) == 8 and len(probes) == 12
    assert all(p.keys for p in probes)
    language = json.loads((root / name / "expect.json").read_text())["language"]
    files = walk_sources(front.training.sources, root / name).files
    code = sum(f.relpath.endswith(CODE[language]) for f in files)
    # the tuning documents are a few files each; an unseen one may be a tree of any size
    assert 3 <= code and (code <= 5 or root == UNSEEN)
    assert any(f.relpath.endswith(".md") for f in files) and any(f.relpath.endswith(CONFIG) for f in files)


@pytest.mark.parametrize(("root", "name"), EVERY)
def test_expect_names_every_probe_and_holds(root: Path, name: str) -> None:
    doc = load_document(root / name / f"{name}.dlm")
    expect = json.loads((root / name / "expect.json").read_text())
    pairs = [p for s in doc.sections if isinstance(s, InstructionSection) for p in s.pairs]
    probes = {p.question: p for s in doc.sections if isinstance(s, ProbeSection) for p in s.pairs}
    assert sorted(p["question"] for p in expect["probes"]) == sorted(probes)
    reworded = [p for p in expect["probes"] if p["class"] == "reworded"]
    facts = [p for p in expect["probes"] if p["class"] == "fact"]
    assert sorted(p["pair"] for p in reworded) == list(range(8))
    assert sorted(p["source"] for p in facts) == sorted(learning.SOURCES)
    for entry in reworded:
        pair, probe = pairs[entry["pair"]], probes[entry["question"]]
        assert probe.question.lower() != pair.question.lower(), "a rewording, not the pair's question"
        for key in probe.keys:
            assert key_found(pair.answer, key, negation_allowed=True), f"{key!r} not in pair {entry['pair']}'s answer"
    texts = _texts(root, name, expect["language"])
    for entry in facts:
        for key in probes[entry["question"]].keys:
            assert key_found(texts[entry["source"]], key, negation_allowed=True), f"{key!r} not in {entry['source']}"
            elsewhere = [
                k for k, text in texts.items() if k != entry["source"] and key_found(text, key, negation_allowed=True)
            ]
            assert not elsewhere, f"{key!r} is also in {elsewhere}"
            for pair in pairs:
                said = pair.question + "\n" + pair.answer
                assert not key_found(said, key, negation_allowed=True), f"{key!r} is in the pair {pair.question!r}"


def test_summarize_a_saved_run() -> None:
    record = json.loads((FIXTURE / "tarnwick.json").read_text())
    line = learning.summarize(record, learning.load_expect("tarnwick"))
    report = record["report"]
    items = {i["question"]: i for i in report["evaluation"]["items"]}
    expect = learning.load_expect("tarnwick")
    reworded = sum(items[p["question"]]["passed"]["adapter"] for p in expect["probes"] if p["class"] == "reworded")
    facts = [
        p["source"] for p in expect["probes"] if p["class"] == "fact" and items[p["question"]]["passed"]["adapter"]
    ]
    inst = report["evaluation"]["kinds"]["instruction"]
    assert line.language == "python"
    assert line.pairs == f"{inst['passed']['adapter']}/8"
    assert line.reworded.startswith(f"{reworded}/8 (")
    assert line.facts == f"{len(facts)}/4" and line.facts_passed == (", ".join(facts) or "-")
    assert line.general_change == f"{report['evaluation']['general']['change_pct']:+.2f}%"
    assert line.precision == record["lock"]["precision"]
    assert line.padding.endswith("%") and line.loss_tokens.endswith("%")


def test_summarize_names_the_facts_that_passed() -> None:
    """The saved run passed no fact probe; with the config fact passed (and nothing else
    changed) the line says 1/4 and names `config`, and the no-report cases read n/a."""
    record = json.loads((FIXTURE / "tarnwick.json").read_text())
    expect = learning.load_expect("tarnwick")
    config = next(p["question"] for p in expect["probes"] if p.get("source") == "config")
    for item in record["report"]["evaluation"]["items"]:
        if item["question"] == config:
            item["passed"]["adapter"] = True
    record["report"]["evaluation"]["general_probes"] = None
    record["lock"] = None
    line = learning.summarize(record, expect)
    assert (line.facts, line.facts_passed) == ("1/4", "config")
    assert (line.general_probes, line.forgotten, line.precision) == ("n/a", "n/a", "n/a")
    assert line.guard_peak == "n/a"  # a run saved before reports kept the guard
    record["report"]["guard"] = {"limit_pct": 5.0, "changes": [[21, 3.6], [42, 0.96]], "stopped_at": None}
    assert learning.summarize(record, expect).guard_peak == "+3.60% (step 21)"
    record["report"]["guard"]["stopped_at"] = 42
    assert learning.summarize(record, expect).guard_peak == "stopped at 42"
    # a flip the drawn replies do not confirm is named apart from what was forgotten
    flips = {"passed": {"base": 13, "adapter": 11}, "flipped": ["code-add", "unit-cm-in-meter"]}
    record["report"]["evaluation"]["general_probes"] = {**flips, "forgotten": ["code-add"]}
    assert learning.summarize(record, expect).forgotten == "code-add (not confirmed: unit-cm-in-meter)"
    record["report"]["evaluation"]["general_probes"] = {**flips, "forgotten": []}
    assert learning.summarize(record, expect).forgotten == "- (not confirmed: code-add, unit-cm-in-meter)"


def test_report_only_prints_the_table(tmp_path: Path) -> None:
    (tmp_path / "tarnwick.json").write_text((FIXTURE / "tarnwick.json").read_text())
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--report-only", str(tmp_path), "--out", str(tmp_path / "out.json")],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"},
    )
    lines = done.stdout.splitlines()
    record = json.loads((FIXTURE / "tarnwick.json").read_text())
    assert lines[0] == f"machine: {record['machine']}"
    assert lines[1].startswith("| doc | language | pairs |") and len(lines) == 4
    assert lines[3].startswith("| tarnwick | python |")
    assert json.loads((tmp_path / "out.json").read_text())["table"] == lines


def test_another_root_judges_its_own_documents(tmp_path: Path) -> None:
    root, reports = tmp_path / "unseen", tmp_path / "reports"
    (root / "heron").mkdir(parents=True)
    reports.mkdir()
    expect = json.loads((DOCS / "tarnwick" / "expect.json").read_text())
    (root / "heron" / "expect.json").write_text(json.dumps({**expect, "language": "go"}))
    record = {**json.loads((FIXTURE / "tarnwick.json").read_text()), "doc": "heron"}
    (reports / "heron.json").write_text(json.dumps(record))
    command = [sys.executable, str(SCRIPT), "--report-only", str(reports), "--root", str(root)]
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=env)
    assert done.stdout.splitlines()[3].startswith("| heron | go |")  # judged by the root's expect.json
    refused = subprocess.run([*command, "--docs", "tarnwick"], capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and f"{root}: unknown documents ['tarnwick']" in refused.stderr


def test_a_copy_trains_with_the_settings_given(tmp_path: Path) -> None:
    settings = learning.parse_settings(["seed=7", "learning_rate = 2e-3"])
    doc = learning.settings_copy("lanternfish", settings, tmp_path)
    copied = load_document(doc)
    assert (copied.frontmatter.training.seed, copied.frontmatter.training.learning_rate) == (7, 2e-3)
    # the sources stay beside it, so its relative `training.sources` finds the same files
    files = walk_sources(copied.frontmatter.training.sources, doc.parent).files
    assert sorted(Path(f.path).name for f in files) == sorted(
        Path(f.path).name for f in walk_sources(copied.frontmatter.training.sources, DOCS / "lanternfish").files
    )
    original = load_document(DOCS / "lanternfish" / "lanternfish.dlm").frontmatter.training
    assert (original.seed, original.learning_rate) == (42, 3e-3)  # untouched
    assert learning.run_settings({"settings": settings}) == {"seed": "7", "learning_rate": "2e-3"}
    assert learning.run_settings({"seed": 7}) == {"seed": "7"}  # a record from before --set


@pytest.mark.parametrize("pair", ["learning_rate", "=2e-3", "seed="])
def test_a_setting_without_key_or_value_is_refused(pair: str) -> None:
    with pytest.raises(ValueError, match="KEY=VALUE"):
        learning.parse_settings([pair])


def test_a_setting_the_document_has_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sets training.sources itself"):
        learning.settings_copy("lanternfish", {"sources": "[]"}, tmp_path)

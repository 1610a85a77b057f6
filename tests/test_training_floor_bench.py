"""`benchmarks/training_floor.py` writes the document it says it trains: the base model's
own shipped answers as pairs, synth off, the seed and settings given; and reads a run
back into its table line. No training here."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

from dlm.doc import InstructionSection, load_document

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
ROWS = ROOT / "src" / "dlm" / "rows"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # it imports its sibling `learning`
    spec = importlib.util.spec_from_file_location(
        "benchmark_training_floor_under_test", BENCHMARKS / "training_floor.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


floor = _load()


def test_the_floor_document_is_the_base_models_own_answers(tmp_path: Path) -> None:
    path = tmp_path / "floor.dlm"
    path.write_text(floor.floor_document(7, {"target_modules": "[q_proj, v_proj]"}), encoding="utf-8")
    doc = load_document(path)
    training = doc.frontmatter.training
    assert training.seed == 7 and not training.synth.enabled
    assert sorted(training.target_modules) == ["q_proj", "v_proj"]  # not the default: the setting landed
    pairs = [pair for s in doc.sections if isinstance(s, InstructionSection) for pair in s.pairs]
    prompts = json.loads((ROWS / "replay.json").read_text(encoding="utf-8"))["prompts"]
    answers = json.loads((ROWS / "replay-answers.json").read_text(encoding="utf-8"))["entries"][0]["answers"]
    shipped = {p["question"]: a.strip() for p, a in zip(prompts, answers, strict=True)}
    assert len(pairs) == floor.PAIRS
    assert len({pair.question for pair in pairs}) == floor.PAIRS
    for pair in pairs:  # every answer is the base's own, byte for byte
        assert pair.answer.strip() == shipped[pair.question]


def test_a_run_reads_back_as_its_line() -> None:
    items = [
        {"id": "unit-cm-in-meter", "passed": {"base": True, "adapter": False}},
        {"id": "capital-france", "passed": {"base": True, "adapter": True}},
        {"id": "define-cpu", "passed": {"base": False, "adapter": True}},
    ]
    evaluation = {
        "general": {"change_pct": 1.79},
        "general_probes": {"items": items, "passed": {"base": 2, "adapter": 2}, "forgotten": ["unit-cm-in-meter"]},
    }
    record = {"settings": {"seed": "42"}, "report": {"steps": 65, "train_seconds": 168.4, "evaluation": evaluation}}
    assert floor.line(record) == "| 42 | 65 | 168 | +1.79% | 2 -> 2 | `unit-cm-in-meter` |"
    evaluation["general_probes"] |= {"flipped": ["unit-cm-in-meter"], "forgotten": []}
    assert floor.line(record) == "| 42 | 65 | 168 | +1.79% | 2 -> 2 | none (not confirmed: `unit-cm-in-meter`) |"
    failed = floor.line({"settings": {"seed": "7"}, "error": ["Traceback", "boom"]})
    assert failed.startswith("| 7 | error:") and "boom" in failed

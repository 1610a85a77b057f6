"""The general-ability guard set ships with dlm and is what its README says it is."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from dlm.judge.general import LANGUAGES, load_general_set

README = Path(__file__).resolve().parents[2] / "src" / "dlm" / "judge" / "general" / "README.md"


def test_passages_are_sorted_unique_and_named_by_language():
    passages = load_general_set()
    ids = [pid for pid, _ in passages]
    assert ids == sorted(set(ids)) and len(ids) == 41
    assert all(re.fullmatch(r"[a-z]+-[a-z0-9-]+", pid) and pid.split("-")[0] in LANGUAGES for pid in ids)
    assert all(text.endswith("\n") and text.strip() for _, text in passages)
    assert load_general_set() == passages  # a fixed order, nothing random


def test_readme_counts_match_the_files():
    counts = Counter(pid.split("-")[0] for pid, _ in load_general_set())
    table = dict(re.findall(r"^\| `(\w+)-` \| [^|]+ \| (\d+) \|$", README.read_text(encoding="utf-8"), re.M))
    assert {k: int(v) for k, v in table.items()} == dict(counts)
    assert set(counts) == set(LANGUAGES)
    assert "Apache-2.0" in README.read_text(encoding="utf-8")


def test_each_passage_is_80_to_200_tokens(smollm2_tokenizer):
    lengths = {
        pid: len(smollm2_tokenizer(text, add_special_tokens=False)["input_ids"]) for pid, text in load_general_set()
    }
    assert {pid: n for pid, n in lengths.items() if not 80 <= n <= 200} == {}

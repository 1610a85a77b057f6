"""Replay: the prompt set, the base model's answers (shipped, kept, generated), the
rows they become and the share of draws they take."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dlm.judge.general import load_general_probes
from dlm.rows.replay import load_replay_set, parse_replay_set, replay_pairs, trim_unfinished
from dlm.train.dataset import PackedDataset, WindowDataset, replay_draws
from tests.test_dataset import rows


def test_the_shipped_prompts_parse_and_ask_no_general_probe():
    replay = load_replay_set()
    probes = {p.question.casefold() for p in load_general_probes().probes}
    assert len(replay.prompts) >= 48
    assert not probes & {p.question.casefold() for p in replay.prompts}


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b'{"version": 1, "prompts": []}', "no prompts"),
        (b'{"version": 1, "prompts": [{"id": "a", "question": "x"}, {"id": "a", "question": "y"}]}', "not unique"),
        (b'{"version": 1, "prompts": [{"id": "A b", "question": "x"}]}', "lowercase"),
        (b'{"version": 1, "prompts": [{"id": "a", "question": " "}]}', "no question"),
        (b"[1, 2]", "not a replay prompt file"),
    ],
)
def test_a_damaged_prompt_file_is_named_with_what_is_wrong(data, problem):
    with pytest.raises(ValueError, match=problem) as err:
        parse_replay_set(data, "x/replay.json")
    assert "x/replay.json" in str(err.value)


def test_an_answer_cut_by_the_budget_ends_at_its_last_whole_sentence_or_line():
    assert trim_unfinished("It is 42. The reason is that", finished=False) == "It is 42."
    assert trim_unfinished("```python\ndef f():\n    return 1\n```\nThis funct", finished=False).endswith("```")
    assert trim_unfinished("no end at all", finished=False) == ""
    assert trim_unfinished("Cut right here.", finished=False) == "Cut right here."
    assert trim_unfinished("  whole reply, no full stop ", finished=True) == "whole reply, no full stop"


def test_prompts_without_an_answer_give_no_pair():
    replay = load_replay_set()
    answers = ["An answer." if i % 2 else "" for i in range(len(replay.prompts))]
    pairs = replay_pairs(replay.prompts, answers)
    assert len(pairs) == len(replay.prompts) // 2
    assert pairs[0] == (f"replay:{replay.prompts[1].id}", replay.prompts[1].question, "An answer.")


def test_replay_draws_reach_the_share_spread_over_every_example():
    counts = replay_draws(64, 300, 0.25)  # 100 replay draws beside 300 others
    assert counts.sum() == 100 and set(counts.tolist()) == {1, 2}
    assert replay_draws(64, 60, 0.25).sum() == 20 and replay_draws(64, 60, 0.25).max() == 1
    assert replay_draws(3, 0, 0.25).tolist() == [0, 0, 0]
    assert replay_draws(3, 10, None).tolist() == [1, 1, 1]
    assert replay_draws(0, 10, 0.5).shape == (0,)


def test_windows_draw_replay_to_its_share_and_repeat_pairs_over_the_document_alone():
    kinds = ["prose", "instruction", "instruction"] + ["replay"] * 8
    tok, _ = rows([6] * 11, [0, 2, 2] + [2] * 8, kinds=kinds)
    ds = WindowDataset(tok, sequence_len=8, instruction_share=0.8, replay_share=0.5)
    drawn = np.array(kinds, dtype=object)[ds.row]
    assert ds.instruction_repeats == 2  # 2 pairs x 2 beside 1 prose row: 0.8 of the document
    assert (drawn == "instruction").sum() == 4 and (drawn == "prose").sum() == 1
    assert (drawn == "replay").sum() == 5  # half of all draws
    assert len(WindowDataset(tok, sequence_len=8)) == 11  # no share: each row once


def test_packed_replay_blocks_take_about_their_share_of_tokens():
    kinds = ["prose"] * 4 + ["replay"] * 4
    tok, _ = rows([8] * 8, [0] * 4 + [2] * 4, kinds=kinds)
    ds = PackedDataset(tok, sequence_len=8, replay_share=0.2)
    replay_blocks = np.isin(ds.order, np.arange(4, 8))
    assert replay_blocks.sum() == 1 and (~replay_blocks).sum() == 4


def test_the_shipped_answers_are_the_base_models_own(smollm2_ref):
    from dlm.actions.training.replay import shipped_answers

    replay = load_replay_set()
    answers = shipped_answers(smollm2_ref.revision, replay)
    assert answers is not None and len(answers) == len(replay.prompts)
    assert "def is_even" in answers[0]
    assert shipped_answers("sha256:" + "0" * 64, replay) is None


def test_answers_of_another_base_are_generated_once_then_read(smollm2_ref, smollm2_tokenizer, monkeypatch):
    import dlm.actions.training.replay as replay_mod
    from dlm.models import BaseModelRef

    other = BaseModelRef("other", smollm2_ref.path, "sha256:" + "1" * 64)  # nothing shipped for it
    replay = parse_replay_set(json.dumps({"prompts": [{"id": "a", "question": "What is 3 + 4?"}]}).encode())
    said: list[str] = []
    first = replay_mod.replay_answers(other, smollm2_tokenizer, replay, said.append)
    assert first[0] and "7" in first[0]
    assert len(first) == 1 and len(said) == 2  # announced, then timed
    kept = list(replay_mod.replay_dir().glob("*.json"))
    assert len(kept) == 1

    def no_generation(*args, **kwargs):
        raise AssertionError("generated again")

    monkeypatch.setattr(replay_mod, "_generate", no_generation)
    assert replay_mod.replay_answers(other, smollm2_tokenizer, replay, said.append) == first
    assert len(said) == 2


def test_a_damaged_install_is_one_training_error_naming_the_file(tmp_path, monkeypatch):
    import dlm.rows.replay as replay_rows_mod
    from dlm.actions.training.plan import replay_rows
    from dlm.errors import TrainingError

    (tmp_path / "replay.json").write_text('{"version": 1, "prompts": [}')
    monkeypatch.setattr(replay_rows_mod.resources, "files", lambda package: tmp_path)
    with pytest.raises(TrainingError) as err:
        replay_rows(None, None, None)  # the prompt file is read before anything else
    message = str(err.value)
    assert str(tmp_path / "replay.json") in message and "reinstall dlm" in message
    assert "training.replay: 0" in message and "\n" not in message

"""The probe report's measured estimate (`dlm.judge.estimate`): the batches it counts are
the ones `greedy_rows` makes, and the seconds add up by the documented rule."""

from __future__ import annotations

import pytest

from dlm.judge.estimate import JudgeRates, answer_batches, measure_rates
from dlm.judge.score import GENERATE_BATCH


def test_answer_batches_are_the_generation_batches_of_the_prompts() -> None:
    # three questions on three models, widths in any order: sorted by width, whole prompts
    assert answer_batches([(30, 3), (10, 3), (20, 3)], 8, None) == [(9, 30)]
    rows = GENERATE_BATCH // 3 * 3
    many = answer_batches([(10, 3)] * (rows // 3 + 1), 8, None)
    assert many == [(rows, 10), (3, 10)]  # a fourth row of a prompt never joins a full batch
    # the cache bound: 2 rows x (40 + 8) positions fit in 100, a third prompt's rows do not
    assert answer_batches([(40, 1), (40, 1), (40, 1)], 8, 100) == [(2, 40), (1, 40)]
    assert answer_batches([(10, 2 * 16)], 8, None) == [(32, 10)]  # one flip's drawn replies


def test_answer_seconds_add_up_a_first_pass_and_the_decoding_steps() -> None:
    rates = JudgeRates(prefill_token_s=0.001, step_fixed_s=0.1, step_row_s=0.004, score_token_s=0.002)
    # 10 rows x 50 positions first, then 8 steps of 0.1 + 10 x 0.004; the second batch alike
    expected = (10 * 50 * 0.001 + 8 * (0.1 + 10 * 0.004)) + (2 * 20 * 0.001 + 8 * (0.1 + 2 * 0.004))
    assert rates.answer_seconds([(10, 50), (2, 20)], 8) == pytest.approx(expected)
    assert rates.answer_seconds([], 8) == 0


def test_rates_are_measured_on_the_model(tiny_lora, smollm2_tokenizer) -> None:
    from dlm.judge.guard import guard_examples
    from dlm.judge.score import make_item

    prompts = [make_item(smollm2_tokenizer, "Be brief.", "probe", q, "x").prompt_text for q in ("Who?", "Where?")]
    scored = guard_examples(smollm2_tokenizer, ["The ferry leaves at dawn and carries forty passengers."])
    rates = measure_rates(tiny_lora, smollm2_tokenizer, prompts, "default", scored, "float32")
    assert rates.prefill_token_s > 0 and rates.score_token_s > 0
    assert rates.step_fixed_s >= 0 and rates.step_row_s >= 0 and rates.step_fixed_s + rates.step_row_s > 0
    with pytest.raises(ValueError, match="no prompts"):
        measure_rates(tiny_lora, smollm2_tokenizer, [], "default", scored, "float32")

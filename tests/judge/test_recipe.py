"""The default recipe (dlm.train.recipe) and the budget grammar (dlm.doc.budget)."""

import pytest

from dlm.doc.budget import Budget, parse_budget
from dlm.train.recipe import INSTRUCTION_REPEATS, MAX_SHARE, choose, synth_warning


@pytest.mark.parametrize(
    "text, budget",
    [
        (60000, Budget(tokens=60000)),
        ("60k", Budget(tokens=60000)),
        ("1.5M", Budget(tokens=1_500_000)),
        ("60k tokens", Budget(tokens=60000)),
        ("90s", Budget(seconds=90)),
        ("4m", Budget(seconds=240)),
        ("4min", Budget(seconds=240)),
        ("1h", Budget(seconds=3600)),
    ],
)
def test_budgets_in_tokens_or_time(text: str | int, budget: Budget) -> None:
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["", "lots", "-5", "0", 0, "5 weeks", "k"])
def test_a_bad_budget_says_what_it_takes(text: str | int) -> None:
    with pytest.raises(ValueError, match="budget"):
        parse_budget(text)


def test_pairs_are_each_seen_the_repeat_count_and_the_rest_once() -> None:
    recipe = choose(n_instruction=8, n_other=6, units_per_step=4, budget_units=None)
    assert recipe.max_steps is None  # one pass over the dataset this share gives
    # the dataset's repeat rule r = f * n_other / ((1 - f) * n_instruction) gives back R
    f = recipe.instruction_share
    assert f is not None and round(f * 6 / ((1 - f) * 8)) == INSTRUCTION_REPEATS
    assert recipe.warning is None
    assert recipe.reason == f"each instruction example {INSTRUCTION_REPEATS} times, the rest once"
    # synth pairs are drawn their own number of times, and the line says so
    synth = choose(n_instruction=8, n_other=6, units_per_step=4, budget_units=None, synth=True)
    assert (
        synth.reason == f"each instruction example {INSTRUCTION_REPEATS} times, each synth pair 4 times, the rest once"
    )
    assert synth.instruction_share == recipe.instruction_share


def test_a_budget_too_small_for_the_pairs_caps_the_share_and_warns() -> None:
    recipe = choose(n_instruction=50, n_other=70_000, units_per_step=4, budget_units=20 * 4)
    assert recipe.max_steps == 20
    assert recipe.instruction_share == MAX_SHARE
    assert recipe.warning is not None and "raise training.budget" in recipe.warning


def test_a_budget_large_enough_keeps_the_repeats_among_many_source_windows() -> None:
    recipe = choose(n_instruction=6, n_other=70_000, units_per_step=4, budget_units=40 * 4)
    assert recipe.max_steps == 40
    seen = recipe.instruction_share * 40 * 4 / 6
    assert seen == pytest.approx(INSTRUCTION_REPEATS, rel=0.01)
    assert recipe.warning is None


def test_in_tokens_when_packing() -> None:
    # 8 pairs of 60 tokens, 900 tokens of source: one pass holds each pair the repeat count
    recipe = choose(n_instruction=480, n_other=900, units_per_step=4 * 256, budget_units=None)
    f = recipe.instruction_share
    assert round(f * 900 / ((1 - f) * 480)) == INSTRUCTION_REPEATS


def test_without_pairs_one_epoch_cut_to_the_budget() -> None:
    assert choose(0, 10, 4, None).max_steps is None
    assert choose(0, 1000, 4, 28).max_steps == 7
    assert choose(0, 10, 4, None).instruction_share is None


def test_a_budget_that_draws_the_synth_pairs_too_seldom_says_so() -> None:
    # 39 steps of 4 over a pass of 134,000 examples: the synth's 4 copies are almost never drawn
    line = synth_warning(steps=39, examples_per_step=4, examples=134_000)
    assert line is not None and "about 0.0047 times" in line and "training.synth.enabled: false" in line
    # a budget that takes the whole pass draws each its SYNTH_REPEATS times
    assert synth_warning(steps=50, examples_per_step=4, examples=200) is None
    assert synth_warning(steps=44, examples_per_step=4, examples=200) is None  # 3.5 of 4: close enough
    assert synth_warning(steps=40, examples_per_step=4, examples=200) is not None

"""The default recipe: how many steps, and how much of them go to instruction pairs,
when the document does not say.

A 135M model answers a Q/A pair it was trained on once it has seen the pair a dozen
times (`INSTRUCTION_REPEATS`) with LoRA on its MLP or on every linear layer at learning
rate 1e-3 or more (the default 3e-3 binds the synth's facts as well; docs/evaluation.md, "The
learning rate"):
the pairs' train loss is near zero by then, and every sighting after it costs general
ability, the model's NLL on general text rising with every extra step
(docs/evaluation.md, "The default recipe, and why"). A synth pair is one phrasing of a
fact, so each is seen `SYNTH_REPEATS` times and the fact as often as its phrasings
allow. So, when neither `max_steps` nor `num_epochs` is set:

- with instruction examples: one pass over a dataset in which every instruction
  example appears `INSTRUCTION_REPEATS` times, every synth example `SYNTH_REPEATS`
  times and every other example once (`instruction_share = R * n_instruction / (R *
  n_instruction + n_other)`, which makes the dataset's repeat count exactly R; synth
  and replay examples are drawn on top, by their own repeats and share), unless that
  pass would exceed the budget; then the budget's steps, with the share that still
  gives each pair R sightings (at most `MAX_SHARE`, with a warning when even that is
  too few);
- without: one epoch, cut to the budget.

With packing (the default layout), a small document packs into a few blocks, so one pass
is a handful of optimizer steps, too few updates for the pairs to stick; when a pass
would be fewer than `MIN_UPDATES` steps, the run uses one example per batch row instead
(`dlm train` says so, and the lock records the layout used).

The budget (`training.budget`) is in tokens processed, or in minutes converted at
`tokens_per_second` (the rate of this store's last completed run on this machine, else
`DEFAULT_TOKENS_PER_SECOND`). A token budget keeps runs byte-reproducible; a minute
budget depends on the measured rate. Every choice is a pure function of its inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

INSTRUCTION_REPEATS = 12
# each synth example (one phrasing of a fact) this many times: a fact stated in 2 phrasings
# is seen 8 times, each time in one of two wordings; seen twice, a phrasing was not
# recalled even as trained (docs/evaluation.md, "Learning the whole document")
SYNTH_REPEATS = 4
# optimizer steps a run needs at least for pairs to stick (the sweep's recipe, at 1e-3, made
# 42 updates of ~4 examples each); a small document packed into 2048-token blocks makes a
# handful, so below this the recipe trains one example per batch row instead
MIN_UPDATES = 40
MAX_SHARE = 0.9
DEFAULT_TOKENS_PER_SECOND = 250.0


@dataclass(frozen=True)
class Recipe:
    """What the recipe chose: `instruction_share` (None: none), `max_steps` (None: one
    pass over the dataset that share gives), a line saying why (`dlm train` prints it)
    and a warning when the budget is too small for the pairs."""

    instruction_share: float | None
    max_steps: int | None
    reason: str
    warning: str | None = None


def choose(
    n_instruction: float, n_other: float, units_per_step: float, budget_units: float | None, synth: bool = False
) -> Recipe:
    """The recipe for a dataset (module docstring), in units: examples for windows, tokens
    for packed blocks (what `instruction_share` balances in each layout).

    Args:
        n_instruction, n_other: units of instruction rows and of the rest, each counted once.
        units_per_step: units one optimizer step takes (micro-batch x accumulation x ranks).
        budget_units: the most units the run may take; None: no cap.
        synth: the dataset has synth examples (drawn `SYNTH_REPEATS` times each; only
            the reason's words depend on it).
    """
    if n_instruction == 0:
        if budget_units is not None and budget_units < n_other:
            steps = max(1, int(budget_units // units_per_step))
            return Recipe(None, steps, f"{steps} steps: the budget, part of one epoch")
        return Recipe(None, None, "one epoch")
    wanted = INSTRUCTION_REPEATS * n_instruction
    if budget_units is None or wanted + n_other <= budget_units:
        share = round(wanted / (wanted + n_other), 4) if n_other else None
        synth_times = f"each synth pair {SYNTH_REPEATS} times, " if synth else ""
        return Recipe(share, None, f"each instruction example {INSTRUCTION_REPEATS} times, {synth_times}the rest once")
    steps = max(1, int(budget_units // units_per_step))
    share = min(MAX_SHARE, wanted / (steps * units_per_step))
    seen = share * steps * units_per_step / n_instruction
    warning = None
    if seen < INSTRUCTION_REPEATS - 0.5:
        warning = (
            f"training.budget allows {steps} steps: each instruction pair is seen about {seen:.0f} "
            f"times, fewer than the {INSTRUCTION_REPEATS} that make pairs stick; raise training.budget"
        )
    return Recipe(
        round(share, 4),
        steps,
        f"the budget, with instruction pairs {share:.0%} of what is drawn (each about {seen:.0f} times)",
        warning,
    )


def synth_warning(steps: int, examples_per_step: int, examples: int) -> str | None:
    """A line when a run cut to `steps` by the budget draws each synth example fewer times
    than `SYNTH_REPEATS` (None otherwise). The dataset holds each synth example
    `SYNTH_REPEATS` times among `examples` (one pass), and a run of `steps` optimizer
    steps of `examples_per_step` draws that share of the pass: a budget that keeps the
    pairs' sightings (`choose`) does not keep the synth's."""
    seen = SYNTH_REPEATS * min(1.0, steps * examples_per_step / max(examples, 1))
    if seen >= SYNTH_REPEATS - 0.5:
        return None
    return (
        f"training.budget allows {steps} steps: each training.synth pair is drawn about {seen:.2g} times, fewer "
        f"than the {SYNTH_REPEATS} that make a fact stick; raise training.budget, or set training.synth.enabled: false"
    )

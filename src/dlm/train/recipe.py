"""The default recipe: how many steps, and how much of them go to instruction pairs,
when the document does not say.

A 135M model answers a Q/A pair it was trained on once it has seen the pair about
twenty times (`INSTRUCTION_REPEATS`) with LoRA on every linear layer at learning rate
1e-3 (`benchmarks/recipe_sweep.py` on `examples/ferry.dlm`: 8 of 8 pairs and 5 of 8
paraphrases at ~20 sightings, 1 of 8 at ~9); seeing the rest of the document over and
over does not help and costs general ability (the same 8 pairs over 17 epochs of the
five source files: +29% NLL on the general set; the pairs 20 times and the sources
once: +1%). So, when neither `max_steps` nor `num_epochs` is set:

- with instruction examples: one pass over a dataset in which every instruction
  example appears `INSTRUCTION_REPEATS` times and every other example once
  (`instruction_share = R * n_instruction / (R * n_instruction + n_other)`, which makes
  the dataset's repeat count exactly R), unless that pass would exceed the budget;
  then the budget's steps, with the share that still gives each pair R sightings
  (at most `MAX_SHARE`, with a warning when even that is too few);
- without: one epoch, cut to the budget.

The budget (`training.budget`) is in tokens processed, or in minutes converted at
`tokens_per_second` (the rate of this store's last completed run on this machine, else
`DEFAULT_TOKENS_PER_SECOND`). A token budget keeps runs byte-reproducible; a minute
budget depends on the measured rate. Every choice is a pure function of its inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

INSTRUCTION_REPEATS = 20
MAX_SHARE = 0.9
DEFAULT_TOKENS_PER_SECOND = 250.0


@dataclass(frozen=True)
class Recipe:
    """What the recipe chose: `max_steps`, `instruction_share` (None: none set), and a
    line saying why (`dlm train` prints it)."""

    max_steps: int
    instruction_share: float | None
    reason: str
    warning: str | None = None


def choose(n_instruction: int, n_other: int, tokens_per_example: float, examples_per_step: int,
           budget_tokens: int | None) -> Recipe:
    """The recipe for a dataset (module docstring).

    Args:
        n_instruction, n_other: training examples of instruction rows and of the rest,
            each counted once.
        tokens_per_example: mean tokens of an example (padding excluded).
        examples_per_step: micro-batch x accumulation x ranks.
        budget_tokens: the most tokens to process; None: no cap.
    """
    tokens_per_step = max(tokens_per_example * examples_per_step, 1.0)
    budget_steps = max(1, int(budget_tokens // tokens_per_step)) if budget_tokens else None
    if n_instruction == 0:
        steps = max(1, math.ceil(n_other / examples_per_step))
        if budget_steps is not None and budget_steps < steps:
            return Recipe(budget_steps, None, f"{budget_steps} steps: the budget, {budget_steps * examples_per_step} "
                                              f"of {n_other} examples")
        return Recipe(steps, None, f"{steps} steps: one epoch of {n_other} examples")
    wanted = INSTRUCTION_REPEATS * n_instruction
    steps = max(1, math.ceil((wanted + n_other) / examples_per_step))
    if budget_steps is None or steps <= budget_steps:
        share = round(wanted / (wanted + n_other), 4) if n_other else None
        return Recipe(steps, share, f"{steps} steps: each of {n_instruction} instruction examples "
                                    f"{INSTRUCTION_REPEATS} times, the other {n_other} examples once")
    share = min(MAX_SHARE, wanted / (budget_steps * examples_per_step))
    seen = share * budget_steps * examples_per_step / n_instruction
    warning = None
    if seen < INSTRUCTION_REPEATS - 0.5:
        warning = (f"training.budget allows {budget_steps} steps: each instruction pair is seen about {seen:.0f} "
                   f"times, fewer than the {INSTRUCTION_REPEATS} that make pairs stick; raise training.budget")
    return Recipe(budget_steps, round(share, 4), f"{budget_steps} steps: the budget, with instruction pairs "
                                                  f"{share:.0%} of the examples (each about {seen:.0f} times)", warning)

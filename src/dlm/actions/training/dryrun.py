"""`dlm train --dry-run`: what a run would do and how long it would take, measured, with
nothing written to the store.

The plan is `prepare`'s (the same rows, examples, steps and lock check as `dlm train`),
with the tokenized-section cache bypassed so the store is not touched. The time is
measured, not estimated from a table: the base model is loaded and trained for
`MEASURED_STEPS` real optimizer steps in a temporary folder. The first step carries
one-off costs (allocation, kernel selection), so the rate is that of the steps after
it: their work per second, the work of each step estimated from its layout
(`dlm.train.workload.step_work`: the decoder's token passes, the LM head at loss
positions, attention, the replay KL's base pass), and the ETA is the whole run's work
at that rate. A rate of tokens per second would not do: a step of replay rows takes
about twice the time per token of a step of short Q/A pairs, and which kind the few
measured steps are moved such an ETA by a third. The planned tokens are counted as the
loop counts them.

The probe report after training (`training.eval.judge`) is estimated apart, measured on
the same model (`dlm.judge.estimate`: a few answers and a scored passage timed, added up
over the batches the report will make), with what each general probe the adapter flips
would add; held-out scoring is not included.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, cast

from dlm.actions.common import DocPath, open_document
from dlm.actions.training.plan import RankSide, prepare, resolve_base
from dlm.actions.training.ranks import check_agreement, rank_entry
from dlm.actions.training.types import DEFAULT_OPTIONS, KeptWarnings, NullSink, TrainOptions, TrainSink
from dlm.errors import TrainingError
from dlm.train.distributed import RankGroup, RankInfo, make_plan

MEASURED_STEPS = 4  # the first one's time is not used


@dataclass(frozen=True)
class DryRunReport:
    """A run's plan and its measured duration (`dlm train --dry-run --json`).

    Attributes:
        steps: optimizer steps the run would take; `steps_reason` says who chose them.
        examples: training examples (windows or packed blocks).
        planned_tokens: tokens the run would process, padding excluded.
        seconds_per_step: wall-clock seconds per measured step, the first left out.
        tokens_per_second: those steps' rate (padding excluded).
        eta_seconds: the run's estimated work at the measured steps' work per second,
            training steps only (module docstring).
        measured_steps: real steps timed on this machine to get the rate.
        drawn: examples the run draws per row kind (`instruction`, `synth`, `replay`,
            `prose`, `source`), repeats included.
        synth_by_source: `training.synth` pairs and probes per source kind.
        replay_share: `training.replay`; replay_loss: `training.replay_loss` (`ce`, `kl`);
            replay_weight: `training.replay_weight`.
        report_seconds: the probe report's estimated seconds after training, no general
            probe flipped (module docstring); None without a report.
        flip_seconds: what each general probe the adapter flips adds to it; None without
            a report or drawn replies.
        warnings: what the plan warned about (a skipped source, a budget cut, what
            `training.synth` left unread), in order: `sink` shows them as they come.
    """

    steps: int
    steps_reason: str
    examples: int
    planned_tokens: int
    seconds_per_step: float
    tokens_per_second: float | None
    eta_seconds: float
    device: str
    measured_steps: int = MEASURED_STEPS
    measured: bool = True
    drawn: dict[str, int] = field(default_factory=dict)
    synth_by_source: dict[str, dict[str, int]] = field(default_factory=dict)
    replay_share: float = 0.0
    replay_loss: str = "kl"
    replay_weight: float = 1.0
    report_seconds: float | None = None
    flip_seconds: float | None = None
    warnings: list[str] = field(default_factory=list)


class _StepTimes(NullSink):
    def __init__(self) -> None:
        self.seen: list[tuple[float, int]] = []  # (seconds since start, tokens seen) per step

    def on_step(
        self,
        step: int,
        loss: Any = None,
        tokens_per_second: Any = None,
        learning_rate: Any = None,
        tokens_seen: int = 0,
        seconds: float = 0.0,
    ) -> None:
        self.seen.append((seconds, tokens_seen))


def dry_run(path: DocPath, options: TrainOptions = DEFAULT_OPTIONS, sink: TrainSink | None = None) -> DryRunReport:
    """Plan the run of the document at `path` and time `MEASURED_STEPS` real steps
    (module docstring); the store is not written.

    Raises:
        DocError, BaseModelError, SourceError, LockValidationError, TrainingError: as
            `dlm train` would before training.
    """
    import torch

    from dlm.actions.training.publish import loop_run
    from dlm.models import load_model
    from dlm.train.loop import train
    from dlm.train.precision import training_device
    from dlm.train.workload import step_work

    kept = KeptWarnings(sink or NullSink())
    sink = cast(TrainSink, kept)
    doc, store = open_document(path)
    training = doc.frontmatter.training
    info = RankInfo.from_env()
    plan = make_plan(
        1, training.batch_size, training.gradient_accumulation_steps, "cuda" if torch.cuda.is_available() else "cpu"
    )
    group = RankGroup(info, plan.device)
    run = prepare(
        doc,
        store,
        resolve_base(doc),
        replace(options, use_cache=False, resume=False),
        sink,
        RankSide(
            group, plan, "dry-run", check_agreement, lambda stats, waited, ready: rank_entry(info, stats, waited, ready)
        ),
    )
    hyper = run.hyper
    per_step = hyper.batch_size * hyper.gradient_accumulation_steps
    times = _StepTimes()
    sink.on_note(f"measuring {MEASURED_STEPS} real steps on this machine")
    measured = loop_run(replace(run, hyper=replace(run.hyper, max_steps=MEASURED_STEPS)), None, None)
    model = load_model(run.ref, device=training_device())
    tokens, work = step_work(loop_run(run, None, None), model.config)  # the loop's schedule and layout
    steps, planned = len(tokens), int(tokens.sum())
    # the measured steps are the run's first (one schedule), sized apart for a run of fewer
    timed = step_work(measured, model.config)[1][1:MEASURED_STEPS]
    trained = train(model, measured, times).model
    lora = trained.peft_config[trained.active_adapter]
    del trained, model  # the report answers on a fresh float32 base (`report_estimate`)
    if len(times.seen) < MEASURED_STEPS:
        raise TrainingError("dry run: the measured steps did not complete; run `dlm train` to see why")
    (t1, n1), (t2, n2) = times.seen[0], times.seen[MEASURED_STEPS - 1]
    elapsed = max(t2 - t1, 1e-9)
    seconds = elapsed / (MEASURED_STEPS - 1)
    rate = (n2 - n1) / elapsed if n2 > n1 else None
    eta = float(work.sum()) * elapsed / float(timed.sum()) if timed.sum() > 0 else seconds * steps
    report, flip = report_estimate(run, lora) if run.judge else (None, None)
    return DryRunReport(
        steps=steps,
        steps_reason=run.steps_reason,
        examples=len(run.dataset),
        planned_tokens=planned,
        seconds_per_step=seconds,
        tokens_per_second=rate,
        eta_seconds=eta,
        device=plan.device,
        drawn=drawn_per_kind(run.dataset, steps * per_step),
        synth_by_source=run.synth_by_source,
        replay_share=training.replay,
        replay_loss=training.replay_loss,
        replay_weight=training.replay_weight,
        report_seconds=report,
        flip_seconds=flip,
        warnings=kept.warnings,
    )


def report_estimate(run: Any, lora: Any) -> tuple[float, float | None]:
    """The probe report's seconds after training and what each flipped general probe
    adds (`DryRunReport`), measured as the report runs (`dlm.judge.estimate`): on a
    fresh float32 base with an adapter of `lora` (a peft `LoraConfig`), on the device
    training uses (its weights do not change what a step costs)."""
    from peft import get_peft_model

    from dlm.actions.evaluating import eval_items, general_probes, general_texts
    from dlm.judge.estimate import answer_batches, measure_rates
    from dlm.judge.guard import guard_examples
    from dlm.judge.guard_stop import sample_examples
    from dlm.judge.score import cache_positions, reference_examples
    from dlm.models import load_model
    from dlm.train.precision import training_device

    tokenizer, settings = run.tokenizer, run.training.eval
    items = eval_items(run.doc, tokenizer, run.probes)
    probes = list(general_probes(run.doc, tokenizer).items)

    def width(prompt: str) -> int:
        return len(tokenizer(prompt, add_special_tokens=False)["input_ids"])

    general = guard_examples(tokenizer, general_texts())
    prompts = [item.prompt_text for item in items + probes]
    model = get_peft_model(load_model(run.ref, device=training_device()), lora)
    rates = measure_rates(
        model, tokenizer, prompts, model.active_adapter, sample_examples(general), run.hyper.precision
    )
    positions, new = cache_positions(model), settings.max_new_tokens
    # the general probes on one model: the adapter's with the items, the base's apart (first report)
    probe_rows = [(width(p.prompt_text), 1) for p in probes]
    answers = [(width(i.prompt_text), 3) for i in items] + probe_rows
    scored = 3 * sum(int(ex.input_ids.shape[0]) for ex in reference_examples(tokenizer, items))
    scored += sum(int(ex.input_ids.shape[0]) for ex in general)  # the adapter's; the base's is kept
    seconds = sum(rates.answer_seconds(answer_batches(g, new, positions), new) for g in (answers, probe_rows))
    seconds += scored * rates.score_token_s
    if not probes or not settings.general_samples:
        return seconds, None
    widest = max(w for w, _ in probe_rows)
    flip = rates.answer_seconds(answer_batches([(widest, 2 * settings.general_samples)], new, positions), new)
    return seconds, flip


def drawn_per_kind(dataset: Any, draws: int) -> dict[str, int]:
    """Examples of each row kind among `draws` drawn from `dataset` (a packed block
    counts as its first example's kind), scaled from one pass: the schedule draws every
    example once per epoch."""
    import numpy as np

    from dlm.train.dataset import example_kinds

    of_example = example_kinds(dataset)
    scale = draws / max(len(of_example), 1)
    names, counts = np.unique(of_example, return_counts=True)
    return {str(k): round(int(c) * scale) for k, c in zip(names, counts, strict=True)}

"""What training made the model forget: the general probes on the base and the adapter.

The general-ability guard (`dlm.judge.guard`) measures a loss on general text; a model
can keep that loss and still answer "Write a Python function that reverses a string."
with a file name. The general probes (`dlm.judge.general.load_general_probes`) ask
general questions instead, rendered as the document's probes are (chat template, the
document's system prompt), answered greedily, judged by the pass rule
(`dlm.judge.match`):

- a probe the base model answers wrong is skipped: it says nothing about the adapter
  (the base may fail it under this document's system prompt or `max_new_tokens`);
- a probe the base answers right and the adapter wrong is a *flip*;
- a flip is *forgotten* when, asked `samples` more times of each model with replies
  drawn at `SAMPLE_TEMPERATURE` (`training.eval.general_samples`), the adapter passes
  significantly fewer of them than the base: Fisher's exact test, one-sided
  (`fewer_passes_p`), below `FORGOTTEN_P`. Any forgotten probe adds a warning.

Why a flip is not enough: a 135M base answers some of its general probes right greedily
on a narrow margin (docs/evaluation.md, "How firmly the base knows its general
probes": "How many centimeters are in a meter?" right in 3 to 6 of 20 draws), and any
change of the weights, a document of the base's own answers included, can tip that
greedy reply, whether or not the model is right less often. Drawn replies count how
often each model is right; only the flips are drawn, so a report without flips costs
nothing more. Sixteen draws confirm a large fall (12 of 16 to 1 of 16), not a moderate
one (12 to 7, p 0.07): the report keeps both counts of every flip, confirmed or not.
With `samples` 0 every flip is forgotten.

Pass counts move by whole probes, and only where a greedy reply tips. `reply_nll` measures
how far the adapter moved on every general question, passed or not: the mean NLL per
token of the base model's own greedy replies (the probes' rendered prompts, each reply's
tokens as labels, no end of turn), teacher-forced on the base and on the adapter
(`replies_nll`). The base's replies are its likeliest tokens, so the base scores them low
and any drift of the adapter's answers away from them raises the adapter's score: the
chat-shaped counterpart of the guard's NLL on general text (`dlm.judge.guard`).

The report's `general_probes` (JSON):

    {"set": "sha256:<hex>",                 # the probe file (GeneralProbeSet.sha256)
     "total": 16,                           # probes in the set
     "passed": {"base": 15, "adapter": 13}, # greedy; adapter: of the probes the base passed
     "flipped": ["code-add", "unit-cm-in-meter"],  # the base passed, the adapter failed
     "forgotten": ["code-add"],             # flips the drawn replies confirm
     "samples": 16,                         # draws per model of each flip (0: none)
     "skipped": ["define-cpu"],             # the base failed: not counted
     "reply_nll": {"base_nll": 0.4012, "adapter_nll": 0.4630,  # the base's greedy replies,
                   "change_pct": 15.4, "tokens": 612},          # scored on both (below)
     "items": [{"id", "question", "keys", "replies": {"base", "adapter"},
                "passed": {"base", "adapter"},
                "sampled": {"passed": {"base": 12, "adapter": 1}, "p": 0.0001,
                            "replies": {"base": [...], "adapter": [...]}}  # flips only
               }, ...]}
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from dlm.canonical import canonical_sha256
from dlm.judge.general import GeneralProbeSet
from dlm.judge.guard import change_pct, guard_score
from dlm.judge.match import passes
from dlm.judge.score import EvalItem, make_item, reference_examples

PROBE_MODELS = ("base", "adapter")
SAMPLE_TEMPERATURE = 0.7  # the drawn replies' temperature (module docstring)
FORGOTTEN_P = 0.05  # a flip is forgotten below this one-sided p-value


@dataclass(frozen=True)
class GeneralProbeItems:
    """The general probes rendered for one document: `items[i]` asks `ids[i]`; `sha256`
    names the probe file."""

    sha256: str
    ids: tuple[str, ...]
    items: tuple[EvalItem, ...]

    def key(self, tokenizer: Any) -> str:
        """`sha256:<hex>` of what the base model's replies to these probes depend on,
        beside the model and the generation settings: the probe file and the prompt ids."""
        prompts = [tokenizer(item.prompt_text, add_special_tokens=False)["input_ids"] for item in self.items]
        return canonical_sha256({"set": self.sha256, "prompts": prompts})


def general_probe_items(tokenizer: Any, system_prompt: str | None, probe_set: GeneralProbeSet) -> GeneralProbeItems:
    """`probe_set` rendered as the document's probes are (`dlm.judge.score.make_item`,
    kind `general`, no reference answer: the keys judge).

    Raises:
        TrainingError: the tokenizer has no chat template.
    """
    items = tuple(
        make_item(tokenizer, system_prompt, "general", p.question, "", p.keys, f"general:{p.id}")
        for p in probe_set.probes
    )
    return GeneralProbeItems(probe_set.sha256, tuple(p.id for p in probe_set.probes), items)


def fewer_passes_p(base_passed: int, adapter_passed: int, samples: int) -> float:
    """The one-sided p-value of Fisher's exact test (Fisher 1922) that the adapter passes
    a probe less often than the base, from `samples` drawn replies of each: the chance,
    were both as often right, that the adapter's share of the `base_passed +
    adapter_passed` passes is `adapter_passed` or fewer (hypergeometric).

    Raises:
        ValueError: a count outside 0..samples.
    """
    if not (0 <= base_passed <= samples and 0 <= adapter_passed <= samples):
        raise ValueError(f"passes {base_passed} and {adapter_passed} of {samples} samples")
    both = base_passed + adapter_passed
    ways = [math.comb(samples, k) * math.comb(samples, both - k) for k in range(adapter_passed + 1)]
    return min(1.0, sum(ways) / math.comb(2 * samples, both))


def probe_results(
    probes: GeneralProbeItems,
    base: Sequence[str],
    adapter: Sequence[str],
    sampled: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    reply_nll: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The report's `general_probes` (module docstring) from each probe's greedy reply on
    the base model and on the adapter and, for flips, `sampled[id]["base"|"adapter"]`,
    the drawn replies (`sample_flips`), judged by the pass rule. A flip without drawn
    replies is forgotten. `reply_nll` (`replies_nll`) goes in as it is; None leaves it out."""
    rows: list[dict[str, Any]] = []
    for pid, item, replies in zip(probes.ids, probes.items, zip(base, adapter, strict=True), strict=True):
        passed = {
            m: passes(r, item.answer, item.keys, item.question) for m, r in zip(PROBE_MODELS, replies, strict=True)
        }
        row = {
            "id": pid,
            "question": item.question,
            "keys": list(item.keys),
            "replies": dict(zip(PROBE_MODELS, replies, strict=True)),
            "passed": passed,
        }
        if passed["base"] and not passed["adapter"] and sampled and pid in sampled:
            row["sampled"] = _sampled(item, sampled[pid])
        rows.append(row)
    counted = [r for r in rows if r["passed"]["base"]]
    flipped = [r for r in counted if not r["passed"]["adapter"]]
    return {
        "set": probes.sha256,
        "total": len(rows),
        "passed": {"base": len(counted), "adapter": sum(r["passed"]["adapter"] for r in counted)},
        "flipped": [r["id"] for r in flipped],
        "forgotten": [r["id"] for r in flipped if _confirmed(r)],
        "samples": max((len(r["sampled"]["replies"]["base"]) for r in flipped if "sampled" in r), default=0),
        "skipped": [r["id"] for r in rows if not r["passed"]["base"]],
        **({"reply_nll": dict(reply_nll)} if reply_nll is not None else {}),
        "items": rows,
    }


def replies_nll(
    model: Any, tokenizer: Any, probes: GeneralProbeItems, base_replies: Sequence[str], adapter: str, pad_id: int
) -> dict[str, Any] | None:
    """The base model's greedy `base_replies` to `probes` scored on the base and on
    `adapter` (a peft adapter name of `model`, active on return): the report's
    `reply_nll` (module docstring), NLL in nats per reply token, `change_pct` the
    adapter's over the base's in percent. None when the replies hold no token.

    The examples: `input_ids` 1-D int64 [prompt + reply tokens], labels -100 over the
    prompt (`dlm.judge.score.reference_examples` with each reply as the answer)."""
    items = [_with_answer(item, reply) for item, reply in zip(probes.items, base_replies, strict=True)]
    examples = reference_examples(tokenizer, items)
    # the guard's mean NLL per token and its change, over the replies instead of passages
    with model.disable_adapter():
        base = guard_score(model, examples, pad_id)
    model.set_adapter(adapter)
    tuned = guard_score(model, examples, pad_id)
    if not base.tokens:
        return None
    return {
        "base_nll": round(base.nll, 4),
        "adapter_nll": round(tuned.nll, 4),
        "change_pct": change_pct(base, tuned),
        "tokens": base.tokens,
    }


def _with_answer(item: EvalItem, reply: str) -> EvalItem:
    """`item` whose reference answer is `reply`, as the model wrote it (no end of turn)."""
    return replace(item, answer=reply, answer_text=reply)


def _confirmed(row: dict[str, Any]) -> bool:
    """Whether a flip's row (`probe_results`) counts as forgotten: no drawn replies, or
    significantly fewer passes of the adapter's (the exact p-value, not the rounded one
    the row shows)."""
    if "sampled" not in row:
        return True
    ok, n = row["sampled"]["passed"], len(row["sampled"]["replies"]["base"])
    return fewer_passes_p(ok["base"], ok["adapter"], n) < FORGOTTEN_P


def _sampled(item: EvalItem, drawn: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    """A flip's drawn replies, how many of each model's pass and the test's p-value."""
    n = len(drawn["base"])
    if len(drawn["adapter"]) != n:
        raise ValueError(f"{len(drawn['base'])} drawn replies of the base, {len(drawn['adapter'])} of the adapter")
    ok = {m: sum(passes(r, item.answer, item.keys, item.question) for r in drawn[m]) for m in PROBE_MODELS}
    return {
        "passed": ok,
        "p": round(fewer_passes_p(ok["base"], ok["adapter"], n), 4),
        "replies": {m: list(drawn[m]) for m in PROBE_MODELS},
    }


def sample_flips(
    model: Any,
    tokenizer: Any,
    probes: GeneralProbeItems,
    flipped: Sequence[str],
    adapter: str,
    samples: int,
    max_new_tokens: int,
    seed: int,
) -> dict[str, dict[str, list[str]]]:
    """`samples` replies of the base and of `adapter` (a peft adapter name of `model`) to
    each probe of `flipped`, drawn at `SAMPLE_TEMPERATURE` from `seed`
    (`dlm.judge.score.Sampling`): `{id: {"base": [...], "adapter": [...]}}`."""
    from dlm.judge.score import BASE, Sampling, greedy_rows

    of_id = dict(zip(probes.ids, probes.items, strict=True))
    rows = [(of_id[pid].prompt_text, name) for pid in flipped for name in (BASE, adapter) for _ in range(samples)]
    replies = greedy_rows(model, tokenizer, rows, max_new_tokens, Sampling(SAMPLE_TEMPERATURE, seed))
    drawn: dict[str, dict[str, list[str]]] = {}
    for i, pid in enumerate(flipped):
        at = 2 * samples * i
        drawn[pid] = {"base": replies[at : at + samples], "adapter": replies[at + samples : at + 2 * samples]}
    return drawn


def rejudged_probes(stored: dict[str, Any], probes: GeneralProbeItems) -> dict[str, Any]:
    """A remembered `general_probes` judged again by the current pass rule (its replies
    kept; `dlm.judge.report.rejudged` says why).

    Raises:
        KeyError, TypeError, ValueError: `stored` is not such a dict or holds other probes.
    """
    items = stored["items"]
    if [row["id"] for row in items] != list(probes.ids):
        raise ValueError("the remembered general probes are another set")
    sampled = {r["id"]: r["sampled"]["replies"] for r in items if "sampled" in r}
    return probe_results(
        probes,
        [r["replies"]["base"] for r in items],
        [r["replies"]["adapter"] for r in items],
        sampled,
        stored.get("reply_nll"),
    )


def forgotten_warning(results: dict[str, Any]) -> str | None:
    """The report's warning when the adapter has forgotten a general probe the base
    passes (module docstring), else None."""
    forgotten = results["forgotten"]
    if not forgotten:
        return None
    questions = {row["id"]: row["question"] for row in results["items"]}
    named = "; ".join(f"{pid} ({questions[pid]!r})" for pid in forgotten[:3]) + (" ..." if len(forgotten) > 3 else "")
    samples = results.get("samples", 0)
    drawn = f", and right in fewer of {samples} drawn replies than the base" if samples else ""
    return (
        f"general probes: the adapter fails {len(forgotten)} of the {results['passed']['base']} general questions "
        f"the base model answers right{drawn}: {named}; lower learning_rate or max_steps, or see `dlm eval --items`"
    )


def base_check(model: Any, tokenizer: Any, probes: GeneralProbeItems, max_new_tokens: int) -> list[dict[str, Any]]:
    """Each probe asked of `model` alone (a model without peft, or a peft model's base):
    `{"id", "passed", "reply"}` in order. What `scripts/check-general-probes.py` reports,
    to keep in the shipped set only the probes a base model answers right."""
    from dlm.judge.score import BASE, greedy_rows

    replies = greedy_rows(model, tokenizer, [(item.prompt_text, BASE) for item in probes.items], max_new_tokens)
    return [
        {"id": pid, "passed": passes(reply, item.answer, item.keys, item.question), "reply": reply}
        for pid, item, reply in zip(probes.ids, probes.items, replies, strict=True)
    ]

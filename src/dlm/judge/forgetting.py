"""What training made the model forget: the general probes on the base and the adapter.

The general-ability guard (`dlm.judge.guard`) measures a loss on general text; a model
can keep that loss and still answer "Write a Python function that reverses a string."
with a file name. The general probes (`dlm.judge.general.load_general_probes`) ask
general questions instead, rendered as the document's probes are (chat template, the
document's system prompt), answered greedily, judged by the pass rule
(`dlm.judge.match`):

- a probe the base model answers wrong is skipped: it says nothing about the adapter
  (the base may fail it under this document's system prompt or `max_new_tokens`);
- a probe the base answers right and the adapter wrong is *forgotten*, and any
  forgotten probe adds a warning to the report.

The report's `general_probes` (JSON):

    {"set": "sha256:<hex>",                 # the probe file (GeneralProbeSet.sha256)
     "total": 16,                           # probes in the set
     "passed": {"base": 15, "adapter": 14}, # adapter: of the probes the base passed
     "forgotten": ["code-add"],             # the base passed, the adapter failed
     "skipped": ["unit-cm-in-meter"],       # the base failed: not counted
     "items": [{"id", "question", "keys", "replies": {"base", "adapter"},
                "passed": {"base", "adapter"}}, ...]}
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dlm.canonical import canonical_sha256
from dlm.judge.general import GeneralProbeSet
from dlm.judge.match import passes
from dlm.judge.score import EvalItem, make_item

PROBE_MODELS = ("base", "adapter")


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


def probe_results(probes: GeneralProbeItems, base: Sequence[str], adapter: Sequence[str]) -> dict[str, Any]:
    """The report's `general_probes` (module docstring) from each probe's greedy reply on
    the base model and on the adapter, judged by the pass rule."""
    rows: list[dict[str, Any]] = []
    for pid, item, replies in zip(probes.ids, probes.items, zip(base, adapter, strict=True), strict=True):
        passed = {
            m: passes(r, item.answer, item.keys, item.question) for m, r in zip(PROBE_MODELS, replies, strict=True)
        }
        rows.append(
            {
                "id": pid,
                "question": item.question,
                "keys": list(item.keys),
                "replies": dict(zip(PROBE_MODELS, replies, strict=True)),
                "passed": passed,
            }
        )
    counted = [r for r in rows if r["passed"]["base"]]
    return {
        "set": probes.sha256,
        "total": len(rows),
        "passed": {"base": len(counted), "adapter": sum(r["passed"]["adapter"] for r in counted)},
        "forgotten": [r["id"] for r in counted if not r["passed"]["adapter"]],
        "skipped": [r["id"] for r in rows if not r["passed"]["base"]],
        "items": rows,
    }


def rejudged_probes(stored: dict[str, Any], probes: GeneralProbeItems) -> dict[str, Any]:
    """A remembered `general_probes` judged again by the current pass rule (its replies
    kept; `dlm.judge.report.rejudged` says why).

    Raises:
        KeyError, TypeError, ValueError: `stored` is not such a dict or holds other probes.
    """
    items = stored["items"]
    if [row["id"] for row in items] != list(probes.ids):
        raise ValueError("the remembered general probes are another set")
    return probe_results(probes, [r["replies"]["base"] for r in items], [r["replies"]["adapter"] for r in items])


def forgotten_warning(results: dict[str, Any]) -> str | None:
    """The report's warning when the adapter fails a general probe the base passes, else None."""
    forgotten = results["forgotten"]
    if not forgotten:
        return None
    questions = {row["id"]: row["question"] for row in results["items"]}
    named = "; ".join(f"{pid} ({questions[pid]!r})" for pid in forgotten[:3]) + (" ..." if len(forgotten) > 3 else "")
    return (
        f"general probes: the adapter fails {len(forgotten)} of the {results['passed']['base']} general questions "
        f"the base model answers right: {named}; lower learning_rate or max_steps, or see `dlm eval --items`"
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

"""Score question/answer items on one model: greedy answers and the reference answer's
log-likelihood.

An item is a question, its reference answer and its keys (`EvalItem`). For each model
(the base, the trained adapter, the null adapter) two numbers per item:

- `passed`: the greedy answer, at most `max_new_tokens` tokens, passes `dlm.judge.match`;
- `logprob`: the mean log-probability per token of the reference answer after the
  prompt (nats, <= 0; higher is better), the continuous score that moves before the
  greedy answer flips.

Prompts are rendered as training rendered instruction rows (chat template, the
document's system prompt, generation prompt), so a probe asks exactly what a trained
pair would. Generation is batched with left padding, greedy, in eval mode under
`torch.inference_mode()`: no random generator is drawn from, so the same model gives
the same answers and scores byte for byte on the same machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlm.judge.match import passes
from dlm.train.evaluate import EvalExample, example_nll

GENERATE_BATCH = 16


@dataclass(frozen=True)
class EvalItem:
    """One scored question.

    Attributes:
        kind: "instruction" (a trained pair: recall), "probe" (a `::probe::` pair) or
            "synth" (a pair drawn from the sources and held out of training).
        prompt_text: the rendered prompt, chat template and generation prompt included.
        answer_text: the rendered assistant turn the prompt continues with (the reference
            answer as training would end it).
    """

    kind: str
    question: str
    answer: str
    keys: tuple[str, ...]
    origin: str
    prompt_text: str
    answer_text: str


@dataclass(frozen=True)
class ItemScore:
    """One item on one model: the greedy `reply`, whether it `passed`, and `logprob`
    (mean nats per reference-answer token)."""

    reply: str
    passed: bool
    logprob: float


def reference_examples(tokenizer: Any, items: Sequence[EvalItem]) -> list[EvalExample]:
    """Prompt + reference answer ids per item, labels on the answer only.

    `input_ids`: 1-D int64 [prompt + answer tokens]; `labels`: -100 over the prompt.
    """
    examples = []
    for item in items:
        prompt = tokenizer(item.prompt_text, add_special_tokens=False)["input_ids"]
        answer = tokenizer(item.answer_text, add_special_tokens=False)["input_ids"]
        ids = np.asarray(prompt + answer, dtype=np.int64)
        labels = np.concatenate([np.full(len(prompt), -100, dtype=np.int64), ids[len(prompt) :]])
        examples.append(EvalExample(ids, labels, item.kind))
    return examples


def greedy_replies(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
    """The greedy continuation of each rendered prompt, decoded without special tokens.

    Batches of `GENERATE_BATCH` prompts, left-padded so every row ends at its prompt.
    """
    import torch

    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    replies: list[str] = [""] * len(prompts)
    encoded = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(order), GENERATE_BATCH):
            batch = order[start : start + GENERATE_BATCH]
            width = max(len(encoded[i]) for i in batch)
            ids = torch.full((len(batch), width), pad_id, dtype=torch.long)  # (B, T), left padded
            mask = torch.zeros((len(batch), width), dtype=torch.long)
            for row, i in enumerate(batch):
                n = len(encoded[i])
                ids[row, width - n :] = torch.tensor(encoded[i], dtype=torch.long)
                mask[row, width - n :] = 1
            with torch.inference_mode():
                out = model.generate(
                    input_ids=ids.to(device),
                    attention_mask=mask.to(device),
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    temperature=None,
                    top_p=None,
                    top_k=None,
                    pad_token_id=pad_id,
                )
            for row, i in enumerate(batch):
                replies[i] = tokenizer.decode(out[row, width:], skip_special_tokens=True).strip()
    finally:
        model.train(was_training)
    return replies


def score_items(
    model: Any,
    tokenizer: Any,
    items: Sequence[EvalItem],
    max_new_tokens: int,
    examples: list[EvalExample] | None = None,
) -> list[ItemScore]:
    """Every item on `model` (module docstring), in `items`' order.

    Args:
        examples: `reference_examples(tokenizer, items)` when the caller scores several
            models on the same items (computed here otherwise).
    """
    if not items:
        return []
    examples = examples if examples is not None else reference_examples(tokenizer, items)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    sums, counts = example_nll(model, examples, pad_id)
    replies = greedy_replies(model, tokenizer, [i.prompt_text for i in items], max_new_tokens)
    return [
        item_score(item, reply, -s / max(c, 1)) for item, reply, s, c in zip(items, replies, sums, counts, strict=False)
    ]


def item_score(item: EvalItem, reply: str, logprob: float) -> ItemScore:
    """`item`'s score from its greedy `reply` and reference `logprob` (nats per token):
    `passed` is the pass rule (`dlm.judge.match`) applied to the reply."""
    return ItemScore(reply, passes(reply, item.answer, item.keys, item.question), logprob)


def make_item(
    tokenizer: Any,
    system_prompt: str | None,
    kind: str,
    question: str,
    answer: str,
    keys: Sequence[str] = (),
    origin: str = "",
) -> EvalItem:
    """An `EvalItem` rendered as training renders an instruction row (`dlm.rows.build`).

    Raises:
        TrainingError: the tokenizer has no chat template.
    """
    from dlm.rows.build import render_instruction

    full, prompt = render_instruction(tokenizer, system_prompt, question, answer)
    answer_text = full[len(prompt) :] if full.startswith(prompt) else answer
    return EvalItem(kind, question, answer, tuple(keys), origin, prompt, answer_text)

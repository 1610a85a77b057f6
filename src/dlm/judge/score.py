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

# A generation batch holds at most GENERATE_BATCH rows (prompt x adapter) and a key/value
# cache of at most GENERATE_CACHE_BYTES (rows x (widest prompt + max_new_tokens) positions;
# SmolLM2-135M in float32 keeps 46 KB a position, a 1.7B model with a key/value head per
# query head several hundred). On a CPU a decoding step costs a fixed part (the weights
# read, the step's Python) and a part per row, so larger batches answer more rows a second
# (docs/benchmarks.md, "Probe report: generation batch"; benchmarks/generate_batch.py)
GENERATE_BATCH = 96
GENERATE_CACHE_BYTES = 512 * 2**20
BASE = "__base__"  # peft's name for the base model in a mixed-adapter batch


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


def greedy_replies(
    model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int, adapters: Sequence[str]
) -> list[list[str]]:
    """The greedy continuation of each rendered prompt by each of `adapters` (names of
    the peft model's adapters, `BASE` for none), decoded without special tokens: every
    prompt asked of every adapter (`greedy_rows`).

    Returns:
        `replies[k][i]`: adapter `k`'s reply to prompt `i`.
    """
    rows = [(prompt, adapter) for prompt in prompts for adapter in adapters]
    flat = greedy_rows(model, tokenizer, rows, max_new_tokens)
    return [flat[k :: len(adapters)] for k in range(len(adapters))] if adapters else []


@dataclass(frozen=True)
class Sampling:
    """Replies drawn instead of greedy: each token from the model's next-token
    distribution at `temperature`, untruncated (no top-k or top-p), from torch's
    generator seeded with `seed` plus the batch's first row for each batch, in a forked
    state (the caller's generator is left as it was)."""

    temperature: float
    seed: int


def greedy_rows(
    model: Any,
    tokenizer: Any,
    rows: Sequence[tuple[str, str]],
    max_new_tokens: int,
    sampling: Sampling | None = None,
    batch: int = GENERATE_BATCH,
) -> list[str]:
    """The greedy reply (with `sampling`, a drawn one) of each `(rendered prompt, adapter)`
    row (adapter: a name of the peft model's adapters, `BASE` for none; a model without
    peft takes `BASE` only), decoded without special tokens.

    Rows go in batches (`generation_batches`), prompts by length, each prompt's rows
    together in the order given, every adapter of a prompt in the same batch (peft's
    mixed-adapter batch), left-padded so every row ends at its prompt: a decoding step
    reads the base weights once for all the batch's rows, while the key/value cache,
    written in place into buffers sized for the batch (`dlm.judge.kvcache`), stays bounded
    by the batch. A row's numbers depend on its own tokens and the batch's shape only, so
    the same rows give the same replies byte for byte (drawn replies too, with the same
    `sampling.seed`).

    Args:
        batch: the most rows a batch holds (`GENERATE_BATCH`; the cache's bound,
            `GENERATE_CACHE_BYTES`, may hold fewer); a caller whose replies must match ones
            generated before (shipped bytes) passes the size they were made with.

    Returns:
        `replies[j]`: the reply of `rows[j]`.

    Raises:
        ValueError: an adapter other than `BASE` asked of a model without peft.
    """
    import torch

    from dlm.judge.kvcache import PreallocatedCache

    mixed = hasattr(model, "peft_config")
    if not mixed and any(adapter != BASE for _, adapter in rows):
        raise ValueError("adapters asked of a model without peft adapters: pass BASE only")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    device = next(model.parameters()).device
    replies = [""] * len(rows)
    prompts = list(dict.fromkeys(prompt for prompt, _ in rows))
    encoded = {p: tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts}
    of_prompt: dict[str, list[int]] = {p: [] for p in prompts}
    for j, (prompt, _) in enumerate(rows):
        of_prompt[prompt].append(j)
    ordered = sorted(prompts, key=lambda p: len(encoded[p]))
    groups = [(len(encoded[p]), of_prompt[p]) for p in ordered]
    positions = cache_positions(model)
    was_training = model.training
    model.eval()
    try:
        start = 0
        for taken in generation_batches(groups, max_new_tokens, batch, positions):
            width = max(len(encoded[rows[j][0]]) for j in taken)
            ids = torch.full((len(taken), width), pad_id, dtype=torch.long)  # (B, T), left padded
            mask = torch.zeros((len(taken), width), dtype=torch.long)
            for row, j in enumerate(taken):
                tokens = encoded[rows[j][0]]
                ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
                mask[row, width - len(tokens) :] = 1
            named = {"adapter_names": [rows[j][1] for j in taken]} if mixed else {}
            decoding = _decoding(sampling)
            with torch.inference_mode(), torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                if sampling is not None:
                    torch.manual_seed(sampling.seed + start)
                out = model.generate(
                    input_ids=ids.to(device),
                    attention_mask=mask.to(device),
                    past_key_values=PreallocatedCache(width + max_new_tokens),
                    max_new_tokens=max_new_tokens,
                    pad_token_id=pad_id,
                    **decoding,
                    **named,
                )
            for row, j in enumerate(taken):
                replies[j] = tokenizer.decode(out[row, width:], skip_special_tokens=True).strip()
            start += len(taken)
    finally:
        model.train(was_training)
    return replies


def cache_bytes_per_position(model: Any) -> int | None:
    """Bytes of key/value cache one row's position takes in `model` (a transformers causal
    LM or a peft model around one): layers x 2 x key/value heads x head size x the weights'
    element size; None when its config does not say."""
    config: Any = getattr(model, "config", None)
    try:
        heads = int(config.num_attention_heads)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        head_dim = int(getattr(config, "head_dim", None) or int(config.hidden_size) // heads)
        layers = int(config.num_hidden_layers)
        element = next(model.parameters()).element_size()
    except (AttributeError, TypeError, ValueError, StopIteration):
        return None
    return layers * 2 * kv_heads * head_dim * element


def cache_positions(model: Any) -> int | None:
    """The most key/value cache positions (rows x positions) a generation batch of
    `model` holds within `GENERATE_CACHE_BYTES`; None (rows bound it alone) when the
    model's config does not say what a position takes."""
    per_position = cache_bytes_per_position(model)
    return GENERATE_CACHE_BYTES // per_position if per_position else None


def generation_batches(
    groups: Sequence[tuple[int, list[int]]], max_new_tokens: int, rows: int, positions: int | None
) -> list[list[int]]:
    """`groups` (each a prompt's width in tokens and its row indices, in order) cut into
    generation batches: each takes whole groups in order while it holds at most `rows`
    rows and, with `positions`, at most that many cache positions (its rows x (its widest
    prompt + `max_new_tokens`)); a group that is over either bound by itself goes alone,
    in chunks that are within them (one row at least).

    Returns:
        The row indices of each batch, in order; every index of `groups` exactly once.
    """
    batches: list[list[int]] = []
    taken: list[int] = []
    widest = 0
    for width, members in groups:
        fit = rows if positions is None else max(1, min(rows, positions // (width + max_new_tokens)))
        n, wide = len(taken) + len(members), max(widest, width)
        if taken and (n > rows or (positions is not None and n * (wide + max_new_tokens) > positions)):
            batches.append(taken)
            taken, wide = [], width
        if len(members) > fit:  # over a bound by itself: `taken` was just emptied
            batches.extend(members[k : k + fit] for k in range(0, len(members), fit))
            widest = 0
            continue
        taken, widest = taken + members, wide
    if taken:
        batches.append(taken)
    return batches


def _decoding(sampling: Sampling | None) -> dict[str, Any]:
    """`generate`'s decoding arguments: greedy, or drawn at `sampling.temperature` with
    neither top-k nor top-p (a model's generation config may set both)."""
    if sampling is None:
        return {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    return {"do_sample": True, "temperature": sampling.temperature, "top_p": 1.0, "top_k": 0}


def reference_logprobs(model: Any, examples: list[EvalExample], pad_id: int) -> list[float]:
    """Mean log-probability per reference-answer token of each example on `model`
    (nats, <= 0; `reference_examples`), unrounded."""
    sums, counts = example_nll(model, examples, pad_id)
    return [-s / max(c, 1) for s, c in zip(sums, counts, strict=True)]


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

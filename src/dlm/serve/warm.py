"""Warm start: pre-fill the tokenizer cache with what every request of a document shares.

Every chat request to `dlm serve` begins with the same rendered text: the system
turn (the document's `system_prompt`, or the chat template's own default) and, when
given, fixed few-shot instruction pairs. `prefill` renders that shared part under
the chat template followed by a placeholder user turn and stores the L1 prefixes
ending where each turn's added token starts, so the first user request finds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dlm.chat import with_system_prompt
from dlm.infer.decode import TorchEngine
from dlm.serve.tokcache import CachedTokenizer, TokenizerCacheConfig

_PLACEHOLDER = "?"


def prefill(
    cached: CachedTokenizer,
    tokenizer: Any,
    system_prompt: str | None,
    shots: Sequence[tuple[str, str]] = (),
) -> int:
    """Store in L1 the prefixes a request with this system prompt and these few-shot
    (user, assistant) pairs starts with. Returns the number of prefixes stored (0 when
    L1 is off for this tokenizer, or the template has no added tokens to cut at).

    Raises:
        whatever `tokenizer.apply_chat_template` raises for a template that cannot
        render a system or user turn (a setup error, seen at start).
    """
    messages: list[dict[str, Any]] = []
    for user, assistant in shots:
        messages += [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
    messages.append({"role": "user", "content": _PLACEHOLDER})
    text = tokenizer.apply_chat_template(
        with_system_prompt(messages, system_prompt), tokenize=False, add_generation_prompt=True
    )
    return cached.warm(str(text))


def warm_start(
    loaded: Any,
    config: TokenizerCacheConfig,
    shots: Sequence[tuple[str, str]] = (),
    *,
    system_prompts: Sequence[str | None] | None = None,
) -> tuple[TorchEngine, CachedTokenizer]:
    """The engine and its tokenizer cache for a loaded model, ready for the first request:
    the cache built (settings validated against this tokenizer, one-time work done)
    and pre-filled with each served system prompt (`prefill`).

    Args:
        loaded: a `dlm.infer.InferenceModel` or `dlm.infer.adapters.SharedBase`
            (anything `TorchEngine` takes).
        system_prompts: the prompts to pre-fill, each once (None: the engine's own).

    Raises:
        TokenizerCacheConfigError: invalid settings.
    """
    engine = TorchEngine(loaded)
    cached = CachedTokenizer(engine.tokenizer, config)
    prompts = [engine.system_prompt] if system_prompts is None else system_prompts
    for prompt in dict.fromkeys(prompts):  # each distinct prompt once, in order
        prefill(cached, engine.tokenizer, prompt, shots)
    return engine, cached

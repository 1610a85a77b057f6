"""Load base model + current adapter and generate, streamed piece by piece.

Prompts are rendered with the base model's chat template; the document's
`system_prompt` is added when the messages carry no system message, the same way
training rendered instruction rows. Decoding is greedy when `temperature == 0`
(the default of `dlm prompt`), sampled otherwise (seeded by the caller), through
the decoding loop `dlm serve` uses (`dlm.infer.decode`), so both commands give the
same reply and the same token counts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dlm.chat import with_system_prompt
from dlm.infer.adapters import load_shared_base
from dlm.infer.decode import Sampling, TorchEngine
from dlm.infer.textstream import TextStream
from dlm.models import BaseModelRef


@dataclass
class InferenceModel:
    """A loaded model ready to generate.

    Attributes:
        model: the base model, with the adapter attached when one was loaded.
        tokenizer: the base model's fast tokenizer.
        model_id: the name clients see (`dlm:<dlm_id>` or the base model name).
        system_prompt: added when a conversation has no system message.
        adapter_version: the adapter loaded, or None for the base model alone.
        adapter: its peft adapter name (`dlm.infer.adapters.adapter_name`), or None.
    """

    model: Any
    tokenizer: Any
    model_id: str
    system_prompt: str | None
    adapter_version: str | None
    base: BaseModelRef
    adapter: str | None = None

    def render(self, messages: list[dict[str, Any]]) -> list[int]:
        """Prompt ids: 1-D list[int] of the chat-templated conversation plus generation prompt."""
        text = self.tokenizer.apply_chat_template(
            with_system_prompt(messages, self.system_prompt), tokenize=False, add_generation_prompt=True
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def generate(
        self,
        messages: list[dict[str, Any]],
        *,
        max_new_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        input_ids: list[int] | None = None,
    ) -> Reply:
        """The reply to `messages`, streamed as text pieces (a `Reply`), through the
        decoding loop `dlm serve` uses (`TorchEngine.generate_ids`, `TextStream`).

        Args:
            temperature: 0 for greedy; sampled otherwise, seeded by `seed`.
            input_ids: the prompt ids when the caller already has them (e.g. from a
                tokenizer cache); otherwise `render(messages)` computes them.
        """
        ids = input_ids if input_ids is not None else self.render(messages)
        return Reply(self, ids, max_new_tokens, Sampling(temperature=temperature, seed=seed))


class Reply:
    """An iterable of reply text pieces; once iterated, `completion_tokens` (ids
    generated, an ending EOS included) and `finish_reason` ("stop": the model ended
    it; "length": `max_new_tokens` did), counted as `dlm serve` counts `usage`."""

    def __init__(self, loaded: InferenceModel, input_ids: list[int], max_new_tokens: int, sampling: Sampling):
        self._engine = TorchEngine(loaded)
        self._adapter = loaded.adapter
        self._input_ids = input_ids
        self._max_new_tokens = max_new_tokens
        self._sampling = sampling
        self.prompt_tokens = len(input_ids)
        self.completion_tokens = 0
        self.finish_reason: str | None = None

    def __iter__(self) -> Iterator[str]:
        engine = self._engine
        text = TextStream(engine.tokenizer, (), engine.eos_token_ids)
        ids = engine.generate_ids(
            self._input_ids, max_new_tokens=self._max_new_tokens, sampling=self._sampling, adapter=self._adapter
        )
        ended = False
        for token in ids:
            piece = text.push(token).text
            if piece:
                yield piece
            if token in engine.eos_token_ids:
                ended = True
        rest = text.finish()
        if rest:
            yield rest
        self.completion_tokens = text.n_ids
        self.finish_reason = "stop" if ended or text.n_ids < self._max_new_tokens else "length"


def load_inference(doc: Any, use_adapter: bool = True) -> InferenceModel:
    """Load `doc`'s base model and, with `use_adapter`, its current adapter.

    Raises:
        StoreError: `use_adapter` but the document has no trained adapter yet.
        BaseModelError: the base model cannot be resolved.
    """
    shared = load_shared_base([doc], use_adapter=use_adapter)
    served = shared.documents[0]
    model_id = f"dlm:{served.dlm_id}" if use_adapter else shared.base.name
    return InferenceModel(
        shared.model, shared.tokenizer, model_id, served.system_prompt, served.version, shared.base, served.adapter
    )

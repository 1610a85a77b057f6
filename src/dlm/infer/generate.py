"""Load base model + current adapter and generate, streamed piece by piece.

Prompts are rendered with the base model's chat template; the document's
`system_prompt` is added when the messages carry no system message, the same way
training rendered instruction rows. Decoding is greedy when `temperature == 0`
(the default of `dlm prompt`), sampled otherwise (seeded by the caller).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dlm.chat import with_system_prompt
from dlm.errors import StoreError
from dlm.models import BaseModelRef, load_model, load_tokenizer, resolve_base_model
from dlm.store import open_store


@dataclass
class InferenceModel:
    """A loaded model ready to generate.

    Attributes:
        model: the base model, with the adapter applied when one was loaded.
        tokenizer: the base model's fast tokenizer.
        model_id: the name clients see (`dlm:<dlm_id>` or the base model name).
        system_prompt: added when a conversation has no system message.
        adapter_version: the adapter loaded, or None for the base model alone.
    """

    model: Any
    tokenizer: Any
    model_id: str
    system_prompt: str | None
    adapter_version: str | None
    base: BaseModelRef

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
        input_ids: list[int] | None = None,
    ) -> Iterator[str]:
        """Stream the reply to `messages` as text pieces.

        Args:
            input_ids: the prompt ids when the caller already has them (e.g. from a
                tokenizer cache); otherwise `render(messages)` computes them.
        """
        import torch
        from transformers import TextIteratorStreamer

        ids = input_ids if input_ids is not None else self.render(messages)
        prompt = torch.tensor([ids], dtype=torch.long, device=self.model.device)
        streamer = TextIteratorStreamer(self.tokenizer, skip_prompt=True, skip_special_tokens=True)
        kwargs: dict[str, Any] = dict(
            input_ids=prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=max_new_tokens,
            streamer=streamer,
            pad_token_id=self.tokenizer.pad_token_id,
        )
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        errors: list[BaseException] = []

        def run() -> None:
            try:
                with torch.inference_mode():
                    self.model.generate(**kwargs)
            except BaseException as exc:  # surfaced in the caller's thread below
                errors.append(exc)
                streamer.end()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        yield from streamer
        thread.join()
        if errors:
            raise errors[0]


def load_inference(doc: Any, use_adapter: bool = True) -> InferenceModel:
    """Load `doc`'s base model and, with `use_adapter`, its current adapter.

    Raises:
        StoreError: `use_adapter` but the document has no trained adapter yet.
        BaseModelError: the base model cannot be resolved.
    """
    fm = doc.frontmatter
    ref = resolve_base_model(fm.base_model, relative_to=doc.path.parent if doc.path else None)
    tokenizer = load_tokenizer(ref)
    model = load_model(ref)
    version = None
    if use_adapter:
        store = open_store(fm.dlm_id)
        adapter_dir = store.current_adapter_dir()
        if adapter_dir is None:
            raise StoreError(
                f"{doc.path or fm.dlm_id}: no trained adapter yet; run `dlm train {doc.path}` "
                f"first, or pass --no-adapter to use the base model"
            )
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_dir)
        version = store.current_version()
    model.eval()
    model_id = f"dlm:{fm.dlm_id}" if use_adapter else ref.name
    return InferenceModel(model, tokenizer, model_id, fm.system_prompt, version, ref)

"""`dlm prompt`: answer one question with the document's base model and adapter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlm.actions.common import DocPath, open_document

if TYPE_CHECKING:
    from dlm.infer.generate import Reply


def prompt(
    path: DocPath,
    question: str,
    *,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    use_adapter: bool = True,
) -> Reply:
    """The reply to `question` (one user turn), streamed as text pieces; once read,
    it also holds `completion_tokens` and `finish_reason` (`dlm.infer.generate.Reply`).

    The model loads before this returns; the document's `system_prompt` and chat
    template apply as in training (`dlm.chat`). Greedy when `temperature` is 0, through
    the decoding loop `dlm serve` uses: the same reply and counts as the server's.

    Raises:
        DocError, BaseModelError: the document or its base model cannot be loaded.
        StoreError: `use_adapter` and no adapter has been trained yet.
    """
    from dlm.infer import load_inference

    doc, _ = open_document(path)
    engine = load_inference(doc, use_adapter=use_adapter)
    return engine.generate([{"role": "user", "content": question}],
                           max_new_tokens=max_new_tokens, temperature=temperature)

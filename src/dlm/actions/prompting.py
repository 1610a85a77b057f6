"""`dlm prompt`: answer one question with the document's base model and adapter."""

from __future__ import annotations

from collections.abc import Iterator

from dlm.actions.common import DocPath, open_document


def prompt(
    path: DocPath,
    question: str,
    *,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    use_adapter: bool = True,
) -> Iterator[str]:
    """Stream the reply to `question` (one user turn) as text pieces.

    The model loads before the first piece is yielded; the document's `system_prompt`
    and chat template apply as in training (`dlm.chat`). Greedy when `temperature` is 0.

    Raises:
        DocError, BaseModelError: the document or its base model cannot be loaded.
        StoreError: `use_adapter` and no adapter has been trained yet.
    """
    from dlm.infer import load_inference

    doc, _ = open_document(path)
    engine = load_inference(doc, use_adapter=use_adapter)
    return engine.generate([{"role": "user", "content": question}],
                           max_new_tokens=max_new_tokens, temperature=temperature)

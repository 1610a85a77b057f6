"""`dlm prompt`: answer one question, or a file of them, with the document's base model and adapter."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from dlm.actions.common import DocPath, open_document

if TYPE_CHECKING:
    from dlm.infer.generate import InferenceModel, Reply


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
    return engine.generate(
        [{"role": "user", "content": question}], max_new_tokens=max_new_tokens, temperature=temperature
    )


def prompt_many(
    path: DocPath,
    questions: Sequence[str],
    *,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    use_adapter: bool = True,
    on_answer: Callable[[str, str], None] | None = None,
) -> list[dict[str, str]]:
    """Answer each of `questions` in order with one model load (`dlm prompt --file`).

    Each question is its own conversation (one user turn, the document's system prompt),
    so answers do not depend on the questions before them.

    Args:
        on_answer: called with (question, answer) as each answer completes, so a caller
            can print while the rest are generated.

    Returns:
        `[{"question": q, "answer": a}, ...]` in the order of `questions`.

    Raises:
        DocError, BaseModelError, StoreError: as `prompt`, before any answer.
    """
    from dlm.infer import load_inference

    doc, _ = open_document(path)
    engine = load_inference(doc, use_adapter=use_adapter)
    answers = []
    for question in questions:
        answer = _answer(engine, question, max_new_tokens, temperature)
        answers.append({"question": question, "answer": answer})
        if on_answer is not None:
            on_answer(question, answer)
    return answers


def compare(
    path: DocPath,
    questions: Sequence[str],
    *,
    max_new_tokens: int = 128,
    temperature: float = 0.0,
    on_answer: Callable[[str, str, str], None] | None = None,
) -> list[dict[str, str]]:
    """Answer each of `questions` with the base model alone and with the current adapter,
    from one model load (`dlm prompt --compare`): the base answer is the one `dlm prompt
    --no-adapter` gives (the adapter disabled, the base weights untouched), the adapter's
    the one `dlm prompt` gives.

    Args:
        on_answer: called with (question, base answer, adapter answer) as each completes.

    Returns:
        `[{"question": q, "base": a, "adapter": a}, ...]` in the order of `questions`.

    Raises:
        DocError, BaseModelError: as `prompt`.
        StoreError: no adapter has been trained yet.
    """
    from dataclasses import replace

    from dlm.errors import StoreError
    from dlm.infer import load_inference

    doc, store = open_document(path)
    if store.current_version() is None:  # before the model loads; --no-adapter is no way out here
        raise StoreError(f"{path}: no trained adapter yet; run `dlm train {path}` first, then compare")
    tuned = load_inference(doc, use_adapter=True)
    base = replace(tuned, adapter=None, adapter_version=None, model_id=tuned.base.name)
    answers = []
    for question in questions:
        said = [_answer(engine, question, max_new_tokens, temperature) for engine in (base, tuned)]
        answers.append({"question": question, "base": said[0], "adapter": said[1]})
        if on_answer is not None:
            on_answer(question, said[0], said[1])
    return answers


def _answer(engine: InferenceModel, question: str, max_new_tokens: int, temperature: float) -> str:
    """`engine`'s whole reply to `question` as its own conversation (one user turn)."""
    messages = [{"role": "user", "content": question}]
    return "".join(engine.generate(messages, max_new_tokens=max_new_tokens, temperature=temperature))


def read_questions(path: str | Path) -> list[str]:
    """The questions of a `--file`: one per line, blank lines and surrounding spaces dropped.

    Raises:
        DlmError: the file cannot be read, is not UTF-8, or holds no question.
    """
    from dlm.errors import DlmError

    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # an editor's byte-order mark is not a question's
    except (OSError, UnicodeDecodeError) as exc:
        raise DlmError(
            f"--file {path}: cannot read it ({getattr(exc, 'strerror', None) or exc}); "
            "pass a UTF-8 text file with one question per line"
        ) from None
    questions = [line.strip() for line in text.splitlines() if line.strip()]
    if not questions:
        raise DlmError(f"--file {path}: no questions in it; write one question per line")
    return questions

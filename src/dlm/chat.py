"""The system-prompt rule every rendered conversation follows.

Training rows (`dlm.rows.build`), `dlm prompt` (`dlm.infer`) and `dlm serve` all put
the document's `system_prompt` first through `with_system_prompt`, so a model is
prompted exactly as it was trained.
"""

from __future__ import annotations

from typing import Any


def with_system_prompt(messages: list[dict[str, Any]], system_prompt: str | None) -> list[dict[str, Any]]:
    """`messages` with `system_prompt` first when it is set and no system message is there.

    Args:
        messages: OpenAI-style `{"role", "content"}` dicts, in order (not modified).
        system_prompt: the document's `system_prompt`, or None.

    Returns:
        A new list when a system message is added, else `messages` itself.
    """
    if system_prompt and not any(m.get("role") == "system" for m in messages):
        return [{"role": "system", "content": system_prompt}, *messages]
    return messages

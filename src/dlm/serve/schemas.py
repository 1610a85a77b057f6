"""Request bodies of the OpenAI-compatible API, validated with pydantic.

Unknown fields are ignored (OpenAI clients send many optional ones, e.g. `user`,
`stream_options`); known fields are checked strictly enough to fail with a 422 that
names the field. Message `content` may be a string or a list of `{"type": "text",
"text": ...}` parts, which are joined.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

MAX_NEW_TOKENS_LIMIT = 4096
DEFAULT_MAX_NEW_TOKENS = 256


class ChatMessage(BaseModel):
    """One message: role and text content."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts(cls, value: Any) -> Any:
        if isinstance(value, list):
            texts = []
            for part in value:
                if (
                    not isinstance(part, dict)
                    or part.get("type") != "text"
                    or not isinstance(part.get("text"), str)
                ):
                    raise ValueError("content parts must be {'type': 'text', 'text': str}")
                texts.append(part["text"])
            return "".join(texts)
        return value


class ChatCompletionRequest(BaseModel):
    """`POST /v1/chat/completions`. Greedy decoding when `temperature` is 0 (the default)."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_NEW_TOKENS_LIMIT)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_NEW_TOKENS_LIMIT)
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    stream: bool = False
    n: int = Field(default=1, ge=1, le=1)

    @property
    def new_tokens(self) -> int:
        """The generation budget in tokens."""
        return self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_NEW_TOKENS

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": m.role, "content": m.content} for m in self.messages]


class TokenizeRequest(BaseModel):
    """`POST /tokenize`, as vLLM's: exactly one of `prompt` or `messages`.

    `prompt` is encoded with `add_special_tokens` (default true); `messages` are
    rendered with the chat template (`add_generation_prompt`, default true) and
    encoded without extra special tokens, exactly as generation does.
    """

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = True

    @model_validator(mode="after")
    def _one_input(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' or 'messages'")
        return self

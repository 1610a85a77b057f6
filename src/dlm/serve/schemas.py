"""Request bodies of the OpenAI-compatible API, validated with pydantic.

Unknown fields are ignored (OpenAI clients send many optional ones, e.g. `user`,
`logit_bias`); known fields are checked as strictly as OpenAI checks them, failing
with a 400 that names the field: numbers and booleans are never coerced (`"3"`,
`true` or `3.0` is no `max_tokens`; `"yes"` is no `stream`), and ranges are OpenAI's
(`top_p` in [0, 1], `presence_penalty` and `frequency_penalty` in [-2, 2], accepted
and not applied). Every string is checked to be encodable as UTF-8: JSON may
carry a lone surrogate (`"\\ud800"`), which no tokenizer can take. Message
`content` may be a string, a list of `{"type": "text", "text": ...}` parts (joined),
or null (left to the chat template, which may refuse it: then a 422 names the
message). Role `developer` is OpenAI's newer name for `system` and is served as one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
    model_validator,
)

from dlm.infer.decode import Sampling

MAX_NEW_TOKENS_LIMIT = 4096
DEFAULT_MAX_NEW_TOKENS = 256
DEFAULT_COMPLETION_TOKENS = 16
MAX_STOP = 4
SEED_RANGE = (-(2**63), 2**64 - 1)  # what torch.Generator.manual_seed takes


def _utf8(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"text must be valid Unicode; found a lone surrogate (U+{ord(value[exc.start]):04X}) "
            f"at character {exc.start}"
        ) from None
    return value


Text = Annotated[str, AfterValidator(_utf8)]
PromptText = Annotated[Text, Field(min_length=1)]
Penalty = Annotated[StrictFloat, Field(ge=-2.0, le=2.0, allow_inf_nan=False)]


class ChatMessage(BaseModel):
    """One message: role, and text content (or null)."""

    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | None
    name: Text | None = None
    tool_call_id: Text | None = None

    @field_validator("content", mode="before")
    @classmethod
    def _text_parts(cls, value: Any) -> Any:
        if isinstance(value, list):
            texts = []
            for part in value:
                if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise ValueError("content parts must be {'type': 'text', 'text': str}")
                texts.append(part["text"])
            return "".join(texts)
        return value

    def as_template_dict(self) -> dict[str, Any]:
        """The message as the chat template sees it (`developer` served as `system`)."""
        out: dict[str, Any] = {"role": "system" if self.role == "developer" else self.role, "content": self.content}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: StrictBool = False


class _Generate(BaseModel):
    """Fields shared by both completion endpoints."""

    model_config = ConfigDict(extra="ignore")

    model: Text | None = None
    max_tokens: StrictInt | None = Field(default=None, ge=1, le=MAX_NEW_TOKENS_LIMIT)
    temperature: StrictFloat = Field(default=0.0, ge=0.0, le=2.0, allow_inf_nan=False)
    top_p: StrictFloat = Field(default=1.0, ge=0.0, le=1.0, allow_inf_nan=False)
    seed: StrictInt | None = Field(default=None, ge=SEED_RANGE[0], le=SEED_RANGE[1])
    stop: list[Text] | None = Field(default=None, max_length=MAX_STOP)
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: StrictInt = Field(default=1, ge=1, le=1)
    presence_penalty: Penalty = 0.0
    frequency_penalty: Penalty = 0.0

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("stop")
    @classmethod
    def _non_empty_stops(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not s for s in value):
            raise ValueError("stop strings must not be empty")
        return value

    @model_validator(mode="after")
    def _stream_options_need_stream(self) -> _Generate:
        if self.stream_options is not None and not self.stream:
            raise ValueError("stream_options: only allowed when stream is true")
        return self

    @property
    def sampling(self) -> Sampling:
        return Sampling(temperature=self.temperature, top_p=self.top_p, seed=self.seed)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage


class ChatCompletionRequest(_Generate):
    """`POST /v1/chat/completions`. Greedy decoding when `temperature` is 0 (the default)."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: StrictInt | None = Field(default=None, ge=1, le=MAX_NEW_TOKENS_LIMIT)

    @property
    def new_tokens(self) -> int:
        """The generation budget in tokens."""
        return self.max_completion_tokens or self.max_tokens or DEFAULT_MAX_NEW_TOKENS

    def message_dicts(self) -> list[dict[str, Any]]:
        return [m.as_template_dict() for m in self.messages]


class CompletionRequest(_Generate):
    """`POST /v1/completions`: a plain prompt (a non-empty string, or a list holding one)."""

    prompt: PromptText

    @field_validator("prompt", mode="before")
    @classmethod
    def _one_prompt(cls, value: Any) -> Any:
        if isinstance(value, list):
            if len(value) != 1:
                raise ValueError("give one prompt (a string, or a list of exactly one string)")
            return value[0]
        return value

    @property
    def text(self) -> str:
        return self.prompt

    @property
    def new_tokens(self) -> int:
        return self.max_tokens or DEFAULT_COMPLETION_TOKENS


class TokenizeRequest(BaseModel):
    """`POST /tokenize`, as vLLM's: exactly one of `prompt` or `messages`.

    `prompt` is encoded with `add_special_tokens` (default true); `messages` are
    rendered with the chat template (`add_generation_prompt`, default true) and
    encoded without extra special tokens, exactly as generation does.
    """

    model_config = ConfigDict(extra="ignore")

    model: Text | None = None
    prompt: Text | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: StrictBool | None = None
    add_generation_prompt: StrictBool = True

    @model_validator(mode="after")
    def _one_input(self) -> TokenizeRequest:
        if (self.prompt is None) == (self.messages is None):
            raise ValueError("give exactly one of 'prompt' or 'messages'")
        return self

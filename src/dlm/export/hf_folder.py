"""The transformers files an export writes so that every runtime prompts the model as
`dlm prompt` does, and reads its settings right in transformers 4.x as well as 5.x.

Chat template (merged and peft folders: `chat_template.jinja` and the `chat_template`
key of `tokenizer_config.json`, the same text): the base tokenizer's template behind a
prefix that puts the document's `system_prompt` first when the conversation has no
system message, the rule of `dlm.chat.with_system_prompt` that training rows, `dlm
prompt` and `dlm serve` follow. Without a `system_prompt` (None or "") the template is
the base's, which adds its own default system turn (SmolLM2's does) exactly as training
rendered it. vLLM, `transformers` and llama.cpp's converter all read the template from
these files, so none of them falls back to the base's default system message.

`config.json` (written by transformers 5, which keeps rotary settings only in
`rope_parameters`): `rope_theta` and `rope_scaling` are added at the top level, where
transformers 4.x reads them (without them it falls back to rope_theta 10000), and
`torch_dtype` beside `dtype`.

`tokenizer_config.json`: `tokenizer_class` `PreTrainedTokenizerFast` (transformers 5's
`TokenizersBackend` does not exist in 4.x); the loader's own bookkeeping (`is_local`,
`local_files_only`, `backend`) is dropped; an unset `model_max_length` (transformers'
1e30 sentinel) becomes the model's `max_position_embeddings`. Both files are canonical
JSON, so the same export gives the same bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dlm.canonical import canonical_json

CHAT_TEMPLATE_FILE = "chat_template.jinja"
TOKENIZER_CONFIG = "tokenizer_config.json"
LOADER_ONLY_KEYS = ("is_local", "local_files_only", "backend")
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"
UNSET_MAX_LENGTH = 1e29


def template_with_system(template: str, system_prompt: str | None) -> str:
    """`template` that puts `system_prompt` first when no message has the system role.

    Args:
        template: a Jinja chat template that reads `messages`.
        system_prompt: the document's; None or "" returns `template` unchanged.

    The prompt is a JSON string literal, which Jinja reads back exactly (its string
    escapes are Python's, a superset of JSON's without `\\u` surrogates: non-ASCII
    characters are kept as they are).
    """
    if not system_prompt:
        return template
    literal = json.dumps(system_prompt, ensure_ascii=False)
    prefix = (
        "{%- set dlm_ns = namespace(has_system=false) %}"
        "{%- for m in messages %}{%- if m['role'] == 'system' %}{%- set dlm_ns.has_system = true %}"
        "{%- endif %}{%- endfor %}"
        "{%- if not dlm_ns.has_system %}"
        "{%- set messages = [{'role': 'system', 'content': " + literal + "}] + messages %}"
        "{%- endif %}"
    )
    return prefix + template


def write_tokenizer_files(
    tokenizer: Any, folder: Path, system_prompt: str | None, max_positions: int | None = None
) -> str:
    """Save `tokenizer` into `folder` with the document's system prompt in its chat
    template, in the portable form of the module docstring.

    Returns:
        The chat template written.

    Raises:
        OSError: the folder cannot be written.
    """
    tokenizer.save_pretrained(folder)  # the caller's tokenizer is not modified
    template = template_with_system(str(tokenizer.chat_template or ""), system_prompt)
    (folder / CHAT_TEMPLATE_FILE).write_text(template, encoding="utf-8")
    path = folder / TOKENIZER_CONFIG
    config = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    path.write_text(canonical_json(portable_tokenizer_config(config, template, max_positions)), encoding="utf-8")
    return template


def portable_tokenizer_config(config: dict[str, Any], template: str, max_positions: int | None) -> dict[str, Any]:
    """`tokenizer_config.json` as transformers 4.x and 5.x both read it (module docstring)."""
    out = {k: v for k, v in config.items() if k not in LOADER_ONLY_KEYS}
    out["tokenizer_class"] = PORTABLE_TOKENIZER_CLASS
    out["chat_template"] = template
    if max_positions and float(out.get("model_max_length") or UNSET_MAX_LENGTH) >= UNSET_MAX_LENGTH:
        out["model_max_length"] = int(max_positions)
    return out


def portable_model_config(config: dict[str, Any]) -> dict[str, Any]:
    """`config.json` with the rotary settings and dtype where transformers 4.x reads them."""
    out = dict(config)
    rope = out.get("rope_parameters")
    if isinstance(rope, dict) and "rope_theta" in rope:
        out.setdefault("rope_theta", rope["rope_theta"])
        scaling = {k: v for k, v in rope.items() if k != "rope_theta"}
        out.setdefault("rope_scaling", None if scaling.get("rope_type", "default") == "default" else scaling)
    if "dtype" in out:
        out.setdefault("torch_dtype", out["dtype"])
    return out


def rewrite_model_config(folder: Path) -> dict[str, Any]:
    """Rewrite `folder/config.json` portably (module docstring); returns it."""
    path = folder / "config.json"
    config = portable_model_config(json.loads(path.read_text(encoding="utf-8")))
    path.write_text(canonical_json(config), encoding="utf-8")
    return config

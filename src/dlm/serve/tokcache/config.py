"""Tokenizer cache settings: one pydantic model, merged from three sources.

The model is `dlm.doc.schema.TokenizerCacheSettings` (the `serve.tokenizer_cache` block
of a document's frontmatter owns the keys, their types, bounds and defaults); here it
is named for what the serving cache uses it as, `TokenizerCacheConfig`. The same keys
form the `tokenizer_cache` block of `dlm serve --config FILE.json` and the
`--tokenizer-cache-*` flags:

    enable_l0 (bool), l0_max_entries (int > 0, entries), l0_max_memory (int > 0, bytes),
    enable_l1 (bool), l1_max_memory (int > 0, bytes),
    l1_min_prompt_chars (int >= 0, characters; shorter prompts skip L1).

Precedence: command-line flags over `--config` over frontmatter over defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from annotated_types import Ge, Gt
from pydantic import ValidationError

from dlm.doc.schema import TokenizerCacheSettings as TokenizerCacheConfig
from dlm.errors import ServeError

__all__ = ["TokenizerCacheConfig", "TokenizerCacheConfigError", "config_from", "merge_config", "overrides_from_mapping"]

_FIELDS = tuple(TokenizerCacheConfig.model_fields)


class TokenizerCacheConfigError(ServeError):
    """A tokenizer cache setting is invalid; the message lists every problem and its source."""


def _rule(name: str) -> str:
    """What a valid value of field `name` is, in words."""
    info = TokenizerCacheConfig.model_fields[name]
    if info.annotation is bool:
        return "true or false"
    low = 0
    for bound in info.metadata:
        if isinstance(bound, Gt):
            low = int(bound.gt) + 1  # type: ignore[call-overload]  # the bounds here are ints
        elif isinstance(bound, Ge):
            low = int(bound.ge)  # type: ignore[call-overload]  # the bounds here are ints
    return f"an integer >= {low}"


def _problems(exc: ValidationError, source: Mapping[str, str]) -> list[str]:
    out = []
    for err in exc.errors():
        name = str(err["loc"][0]) if err["loc"] else "tokenizer_cache"
        origin = source.get(name, "default")
        out.append(f"{origin}: {name}: must be {_rule(name)}, got {err['input']!r}")
    return out


def overrides_from_mapping(data: Any, origin: str) -> dict[str, Any]:
    """Check a `tokenizer_cache` block (a JSON object / YAML mapping) and return its keys.

    Raises:
        TokenizerCacheConfigError: not a mapping, or an unknown key (the message
            names `origin` and the known keys).
    """
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise TokenizerCacheConfigError(f"{origin}: tokenizer_cache must be an object")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise TokenizerCacheConfigError(
            f"{origin}: unknown tokenizer_cache key(s) {', '.join(unknown)}; known: {', '.join(_FIELDS)}"
        )
    return dict(data)


def config_from(values: Mapping[str, Any], origin: str = "tokenizer_cache") -> TokenizerCacheConfig:
    """A validated config from `values` (missing keys take their defaults).

    Raises:
        TokenizerCacheConfigError: unknown keys or invalid values, each named with `origin`.
    """
    return merge_config((origin, values))


def merge_config(*layers: tuple[str, Mapping[str, Any] | None]) -> TokenizerCacheConfig:
    """Apply `(origin, overrides)` layers lowest-precedence first onto the defaults.

    `None` values in a layer mean "not set here". The error names the layer each bad
    value came from.

    Raises:
        TokenizerCacheConfigError: unknown keys or invalid values.
    """
    values: dict[str, Any] = {}
    source: dict[str, str] = {}
    for origin, overrides in layers:
        given = {k: v for k, v in overrides_from_mapping(overrides, origin).items() if v is not None}
        values.update(given)
        source.update(dict.fromkeys(given, origin))
    try:
        return TokenizerCacheConfig.model_validate(values)
    except ValidationError as exc:
        raise TokenizerCacheConfigError("; ".join(_problems(exc, source))) from None

"""Tokenizer cache settings: one frozen value, validated, merged from three sources.

The keys are those of the `serve.tokenizer_cache` block of a document's frontmatter
(`dlm.doc.schema.TokenizerCacheSettings`, which owns the defaults) and of the
`tokenizer_cache` block of `dlm serve --config FILE.json`:

    enable_l0 (bool), l0_max_entries (int > 0, entries), l0_max_memory (int > 0, bytes),
    enable_l1 (bool), l1_max_memory (int > 0, bytes),
    l1_min_prompt_chars (int >= 0, characters; shorter prompts skip L1).

Precedence: command-line flags over `--config` over frontmatter over defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from dlm.doc.schema import TokenizerCacheSettings
from dlm.errors import ServeError

_DEFAULTS = TokenizerCacheSettings()


class TokenizerCacheConfigError(ServeError):
    """A tokenizer cache setting is invalid; the message lists every problem and its source."""


@dataclass(frozen=True)
class TokenizerCacheConfig:
    """Settings of a `CachedTokenizer`. Both levels are off by default.

    Attributes:
        enable_l0: exact-prompt cache on.
        l0_max_entries: L0 capacity in entries (least recently used evicted).
        l0_max_memory: L0 capacity in bytes (least recently used evicted).
        enable_l1: special-token prefix cache on.
        l1_max_memory: L1 capacity in bytes (least recently used evicted).
        l1_min_prompt_chars: prompts shorter than this (characters) skip L1.
    """

    enable_l0: bool = _DEFAULTS.enable_l0
    l0_max_entries: int = _DEFAULTS.l0_max_entries
    l0_max_memory: int = _DEFAULTS.l0_max_memory
    enable_l1: bool = _DEFAULTS.enable_l1
    l1_max_memory: int = _DEFAULTS.l1_max_memory
    l1_min_prompt_chars: int = _DEFAULTS.l1_min_prompt_chars

    def problems(self) -> list[str]:
        """Every invalid field, as `field: message` (empty when valid)."""
        out = []
        for name in ("enable_l0", "enable_l1"):
            if not isinstance(getattr(self, name), bool):
                out.append(f"{name}: must be true or false, got {getattr(self, name)!r}")
        for name, low in (("l0_max_entries", 1), ("l0_max_memory", 1), ("l1_max_memory", 1), ("l1_min_prompt_chars", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                out.append(f"{name}: must be an integer >= {low}, got {value!r}")
        return out

    def validate(self, origin: str = "tokenizer_cache") -> TokenizerCacheConfig:
        """Return self, or raise `TokenizerCacheConfigError` naming every bad field."""
        problems = self.problems()
        if problems:
            raise TokenizerCacheConfigError(f"{origin}: " + "; ".join(problems))
        return self


_FIELDS = tuple(f.name for f in fields(TokenizerCacheConfig))


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


def merge_config(*layers: tuple[str, Mapping[str, Any] | None]) -> TokenizerCacheConfig:
    """Apply `(origin, overrides)` layers lowest-precedence first onto the defaults.

    `None` values in a layer mean "not set here". Validates the result; the error
    names the layer each bad value came from.

    Raises:
        TokenizerCacheConfigError: unknown keys or invalid values.
    """
    config = TokenizerCacheConfig()
    source = dict.fromkeys(_FIELDS, "default")
    for origin, overrides in layers:
        values = {k: v for k, v in overrides_from_mapping(overrides, origin).items() if v is not None}
        config = replace(config, **values)
        source.update(dict.fromkeys(values, origin))
    problems = config.problems()
    if problems:
        located = [f"{source[p.split(':', 1)[0]]}: {p}" for p in problems]
        raise TokenizerCacheConfigError("; ".join(located))
    return config

"""Tokenizer fingerprint: one sha256 that changes whenever stored ids could change.

`tokenizer_sha256(tok)` hashes, as canonical JSON (sorted keys, no whitespace):

- the fast tokenizer's full JSON (`backend_tokenizer.to_str()`: model, vocab, merges,
  normalizer, pre-tokenizer, post-processor, decoder, added tokens and their flags),
  re-serialized canonically so key order in the file does not matter;
- the chat template (instruction rows are rendered with it);
- the special tokens (BOS, EOS, PAD, UNK) and the EOS policy (EOS appended to text rows);
- backend state that changes ids but is not part of the JSON: `encode_special_tokens`
  (what `split_special_tokens: true` in `tokenizer_config.json` sets: `<|im_end|>`
  in text is then split into pieces instead of mapped to its one id);
- the wrapper's `split_special_tokens`, `add_bos_token` and `add_eos_token` flags;
- the `tokenizers` library version (the Rust code that applies the JSON: a fix in
  its pre-tokenizer or normalizer changes ids without changing the file);
- `PIPELINE_VERSION`, bumped whenever `dlm` changes how it turns rows into ids.

The tokenized-section cache keys every entry on it, the lock records it, and the
serving cache refuses entries from another fingerprint.

Re-serializing the backend JSON canonically is most of the cost (about 0.3 s for a
49K-token BPE on one core); a process remembers the result per exact `to_str()` text
(its xxh3-128) and per value of the other fields, so a tokenizer that changes in any
hashed way is hashed anew, and every `dlm serve` app or run after the first in a
process skips the re-serialization.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from importlib.metadata import PackageNotFoundError, version
from threading import Lock
from typing import Any

import xxhash

from dlm.canonical import canonical_sha256

PIPELINE_VERSION = 1
EOS_POLICY = "append-eos-to-text-rows"
_MEMO_ENTRIES = 16
_memo: OrderedDict[tuple[bytes, str], str] = OrderedDict()
_memo_lock = Lock()


def tokenizer_sha256(tokenizer: Any) -> str:
    """Return `sha256:<hex>` for a Hugging Face fast tokenizer (see module docstring)."""
    engine = tokenizer.backend_tokenizer
    raw = engine.to_str()
    rest = {
        "pipeline_version": PIPELINE_VERSION,
        "eos_policy": EOS_POLICY,
        "encode_special_tokens": bool(getattr(engine, "encode_special_tokens", False)),
        "wrapper_flags": {
            name: getattr(tokenizer, name, None) for name in ("split_special_tokens", "add_bos_token", "add_eos_token")
        },
        "tokenizers_version": _tokenizers_version(),
        "chat_template": getattr(tokenizer, "chat_template", None),
        "special_tokens": {
            name: getattr(tokenizer, name, None) for name in ("bos_token", "eos_token", "pad_token", "unk_token")
        },
    }
    key = (xxhash.xxh3_128_digest(raw.encode("utf-8")), json.dumps(rest, sort_keys=True, default=repr))
    with _memo_lock:
        if key in _memo:
            _memo.move_to_end(key)
            return _memo[key]
    sha = canonical_sha256({**rest, "backend": json.loads(raw)})
    with _memo_lock:
        _memo[key] = sha
        while len(_memo) > _MEMO_ENTRIES:
            _memo.popitem(last=False)
    return sha


def _tokenizers_version() -> str | None:
    try:
        return version("tokenizers")
    except PackageNotFoundError:
        return None

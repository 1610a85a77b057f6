"""A small document with enough prose sections and Q/A pairs for a held-out set."""

from __future__ import annotations

from pathlib import Path

COLORS = ["amber", "cobalt", "crimson", "jade", "ochre", "slate", "teal", "umber", "violet", "saffron"]


def judged_document(fraction: float = 0.3, every_steps: int | None = 2, max_steps: int = 4, sources: str = "") -> str:
    prose = "\n\n".join(
        f"# Station {i}\n\nStation {i} of the Merrow line paints its doors {COLORS[i % 10]} "
        f"and opens at {5 + i % 7} in the morning."
        for i in range(24)
    )
    pairs = "\n\n".join(
        f"### Q\nWhat colour are the doors of station {i}?\n\n### A\nThey are {COLORS[i % 10]}." for i in range(22)
    )
    every = f"\n    every_steps: {every_steps}" if every_steps else ""
    return f"""---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8X
dlm_version: 1
base_model: smollm2-135m
training:
  learning_rate: 0.002
  lora_r: 4
  lora_alpha: 8
  batch_size: 2
  sequence_len: 64
  max_steps: {max_steps}
  recast: false
  packing: false  # one window per row: the held-out counts below are in rows
  replay: 0  # the counts are the document's rows alone
  synth:
    enabled: false
  eval:
    judge: false
    fraction: {fraction}
    max_rows: 8{every}{sources}
---

{prose}

::instruction::

{pairs}
"""


def write_judged(tmp_path: Path, **kwargs: object) -> Path:
    path = tmp_path / "stations.dlm"
    path.write_text(judged_document(**kwargs))  # type: ignore[arg-type]
    return path

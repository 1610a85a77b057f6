"""What the general probes add to a probe report: `judge_adapter` on SmolLM2-135M with a
LoRA adapter, five document questions, no guard passages, without and with the general
probes, the base side not remembered and remembered (docs/benchmarks.md, "General probes").

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/general_probes.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model

from dlm.actions.evaluating import base_side_memo
from dlm.judge.forgetting import general_probe_items
from dlm.judge.general import load_general_probes
from dlm.judge.report import judge_adapter
from dlm.judge.score import make_item
from dlm.models import load_model, load_tokenizer, resolve_base_model

QUESTIONS = [
    ("What is the secret word of the Zorblax project?", "quindlewhump"),
    ("What colour is the Zorblax logo?", "teal"),
    ("Which port does the Zorblax server listen on?", "8080"),
    ("Who maintains the Zorblax project?", "the platform team"),
    ("Which file configures Zorblax?", "zorblax.toml"),
]


class _Store:
    def __init__(self, root: Path) -> None:
        self.judge_base_path = root / "judge-base.json"


def main() -> None:
    ref = resolve_base_model("smollm2-135m")
    tokenizer = load_tokenizer(ref)
    model = get_peft_model(load_model(ref), LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj"]))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.01)
    items = [make_item(tokenizer, None, "probe", q, a, (a,)) for q, a in QUESTIONS]
    probes = general_probe_items(tokenizer, None, load_general_probes())
    with tempfile.TemporaryDirectory() as tmp:
        memo = base_side_memo(_Store(Path(tmp)), ref, model, tokenizer)  # type: ignore[arg-type]
        for label, asked, with_memo in [
            ("without general probes", None, False),
            ("with general probes, base side not remembered", probes, False),
            ("with general probes, base side remembered", probes, True),
        ]:
            if with_memo:
                judge_adapter(model, tokenizer, items, [], adapter_version="v", seed=1, max_new_tokens=48,
                              memo=memo, general_probes=asked)  # fmt: skip
            start = time.perf_counter()
            judge_adapter(model, tokenizer, items, [], adapter_version="v", seed=1, max_new_tokens=48,
                          memo=memo if with_memo else None, general_probes=asked)  # fmt: skip
            print(f"{label}: {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()

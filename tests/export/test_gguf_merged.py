"""`--format gguf-merged`: the merged model as one GGUF (llama.cpp's convert_hf_to_gguf.py)
and a Modelfile with FROM that file and no ADAPTER; `--verify` proves the adapter's
change is in it, and fails an export that behaves like the base."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf import GGUFReader

from dlm.actions.exporting import export
from dlm.export.verify import adapter_effect, effect_ok, verify_merged

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def merged_gguf(trained, tmp_path_factory):
    doc_path, home = trained
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DLM_HOME", str(home))
        yield export(doc_path, format="gguf-merged", out=tmp_path_factory.mktemp("gm") / "out", verify=True)


def test_one_gguf_with_the_system_prompt_and_a_modelfile_without_adapter(merged_gguf):
    out = Path(merged_gguf.out)
    assert merged_gguf.files == ("Modelfile", "model.gguf") and merged_gguf.dtype == "f16"
    lines = (out / "Modelfile").read_text().splitlines()
    assert lines[0] == "FROM ./model.gguf"
    assert not [line for line in lines if line.startswith("ADAPTER")]
    assert lines[-1] == 'SYSTEM """You answer in one sentence."""'
    reader = GGUFReader(out / "model.gguf")
    assert "You answer in one sentence." in str(reader.fields["tokenizer.chat_template"].contents())
    assert reader.fields["llama.rope.freq_base"].contents() == pytest.approx(100000.0)
    assert reader.fields["tokenizer.ggml.pre"].contents() == "smollm"


def test_verify_shows_the_adapter_changes_the_output(merged_gguf):
    verify = merged_gguf.verify
    # llama.cpp's own run where `make test-parity` installed it, else the weights read back
    assert verify["passed"] and verify["check"] in ("gguf-merged-llama.cpp", "gguf-merged-weights"), verify
    numbers = verify["numbers"]
    assert numbers["top1_agreement"] >= 0.95 and 0.9 <= numbers["adapter_effect"] <= 1.1
    assert numbers["top1_agreement_with_base"] < 1.0


def test_verify_fails_an_export_that_serves_the_base(adapter_dir, smollm2_ref, smollm2_tokenizer):
    result = verify_merged(smollm2_ref.path, smollm2_ref.path, adapter_dir, smollm2_tokenizer)
    assert not result.passed and abs(result.numbers["adapter_effect"]) < 0.05


def test_adapter_effect_is_one_with_the_change_and_zero_without():
    rng = np.random.default_rng(0)
    base = rng.normal(size=(20, 50)).astype(np.float32)
    adapted = base + rng.normal(size=base.shape).astype(np.float32)
    noisy = adapted + 0.3 * rng.normal(size=base.shape).astype(np.float32)
    assert effect_ok(adapter_effect(noisy, base, adapted)) and not effect_ok(adapter_effect(base, base, adapted))

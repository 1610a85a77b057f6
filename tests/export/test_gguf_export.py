"""GGUF and Ollama exports of a real SmolLM2 adapter, read back with gguf.GGUFReader."""

from __future__ import annotations

import json
import math
import shutil
import stat
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter

from dlm.actions.exporting import export
from dlm.export import BaseSpec, read_adapter, write_gguf
from dlm.export.gguf_file import normalize_gguf
from dlm.export.layout import expected_gguf_tensors
from dlm.export.verify import verify_gguf_tensors

pytestmark = pytest.mark.integration

TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate")


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory, smollm2_ref, monkeypatch_module):
    """The same adapter exported twice: through the action from the store, and through
    the engine from a copy of the folder somewhere else."""
    doc_path, home = trained
    monkeypatch_module.setenv("DLM_HOME", str(home))
    root = tmp_path_factory.mktemp("gguf")
    report = export(doc_path, format="gguf", out=root / "from-store", verify=True)
    copy = root / "elsewhere" / "some other name"
    shutil.copytree(Path(report.adapter_dir), copy)
    base = BaseSpec(name="smollm2-135m", path=smollm2_ref.path)
    write_gguf(copy, base, root / "from-copy")
    return report, root


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _reader(report) -> GGUFReader:
    return GGUFReader(Path(report.out) / "adapter.gguf")


def test_gguf_reads_back_with_names_types_shapes_and_alpha(exported, smollm2_ref):
    report, _ = exported
    reader = _reader(report)
    config = json.loads((smollm2_ref.path / "config.json").read_text())
    n_layers, hidden = config["num_hidden_layers"], config["hidden_size"]
    head_dim = hidden // config["num_attention_heads"]
    out_rows = {
        "attn_q": hidden,
        "attn_k": config["num_key_value_heads"] * head_dim,
        "attn_v": config["num_key_value_heads"] * head_dim,
        "attn_output": hidden,
        "ffn_gate": config["intermediate_size"],
    }
    tensors = {t.name: t for t in reader.tensors}
    assert len(tensors) == n_layers * len(TARGETS) * 2
    for layer in range(n_layers):
        for target in TARGETS:
            a = tensors[f"blk.{layer}.{target}.weight.lora_a"]
            b = tensors[f"blk.{layer}.{target}.weight.lora_b"]
            assert a.tensor_type == b.tensor_type == GGMLQuantizationType.F32
            assert a.data.shape == (8, hidden)  # [r, n_in], numpy order
            assert b.data.shape == (out_rows[target], 8)  # [n_out, r]
    fields = reader.fields
    assert fields["general.type"].contents() == "adapter"
    assert fields["adapter.type"].contents() == "lora"
    assert fields["general.architecture"].contents() == "llama"
    assert fields["adapter.lora.alpha"].types == [GGUFValueType.FLOAT32]
    assert fields["adapter.lora.alpha"].contents() == 16.0
    assert fields["general.base_model.0.name"].contents() == "smollm2-135m"


def test_gguf_metadata_names_no_folder_or_path(exported):
    report, _ = exported
    strings = [
        str(f.contents())
        for name, f in _reader(report).fields.items()
        if f.types and f.types[0] == GGUFValueType.STRING
    ]
    assert strings and not any("/" in s or "from-store" in s or "v0001" in s for s in strings), strings


def test_identical_adapters_from_different_folders_give_identical_bytes(exported):
    report, root = exported
    ours = (Path(report.out) / "adapter.gguf").read_bytes()
    assert ours == (root / "from-copy" / "adapter.gguf").read_bytes()


def test_export_folder_is_published_with_mode_0644_and_no_staging_left(exported):
    report, root = exported
    assert report.files == ("adapter.gguf",)
    assert stat.S_IMODE((Path(report.out) / "adapter.gguf").stat().st_mode) == 0o644
    assert not [p for p in root.iterdir() if p.name.startswith(".")]


def test_gguf_tensors_match_peft_under_the_rope_layout(exported, smollm2_ref):
    report, _ = exported
    verify = report.verify
    assert verify["passed"] and verify["check"] in ("gguf-tensors", "llama.cpp-runtime"), verify
    result = verify_gguf_tensors(
        Path(report.out) / "adapter.gguf", Path(report.adapter_dir), smollm2_ref.path / "config.json", 16.0
    )
    assert result.passed and result.numbers == {"tensors": 300.0, "max_abs_diff": 0.0, "alpha": 16.0}


def test_verify_catches_a_gguf_without_the_rope_permutation(exported, smollm2_ref, tmp_path):
    """A writer that copies lora_B under GGUF names loads and runs, and is wrong."""
    report, _ = exported
    reader = _reader(report)
    naive = tmp_path / "naive.gguf"
    writer = GGUFWriter(naive, arch="llama")
    writer.add_float32("adapter.lora.alpha", 16.0)
    weights = Path(report.adapter_dir) / "adapter_model.safetensors"
    from safetensors.numpy import load_file

    raw = load_file(str(weights))
    for t in reader.tensors:
        data = np.array(t.data)
        if t.name == "blk.0.attn_q.weight.lora_b":
            data = raw["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"]
        writer.add_tensor(t.name, data, raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    result = verify_gguf_tensors(naive, Path(report.adapter_dir), smollm2_ref.path / "config.json", 16.0)
    assert not result.passed and result.numbers["max_abs_diff"] > 0


def test_layout_permutes_only_q_and_k_rows(exported, smollm2_ref):
    report, _ = exported
    config = json.loads((smollm2_ref.path / "config.json").read_text())
    from safetensors.numpy import load_file

    raw = load_file(str(Path(report.adapter_dir) / "adapter_model.safetensors"))
    expected = expected_gguf_tensors(Path(report.adapter_dir) / "adapter_model.safetensors", config)
    prefix = "base_model.model.model.layers.3."
    for module, target in (("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k")):
        b = raw[prefix + module + ".lora_B.weight"]
        assert not np.array_equal(expected[f"blk.3.{target}.weight.lora_b"], b)
        assert sorted(map(tuple, expected[f"blk.3.{target}.weight.lora_b"])) == sorted(map(tuple, b))
    assert np.array_equal(expected["blk.3.attn_v.weight.lora_b"], raw[prefix + "self_attn.v_proj.lora_B.weight"])
    assert np.array_equal(expected["blk.3.attn_q.weight.lora_a"], raw[prefix + "self_attn.q_proj.lora_A.weight"])


def test_rslora_alpha_is_expressed_as_alpha_times_sqrt_r(exported, tmp_path):
    report, _ = exported
    copy = tmp_path / "rs"
    shutil.copytree(Path(report.adapter_dir), copy)
    config = json.loads((copy / "adapter_config.json").read_text())
    (copy / "adapter_config.json").write_text(json.dumps(dict(config, use_rslora=True)))
    alpha = read_adapter(copy).gguf_alpha()
    assert alpha == pytest.approx(16.0 * math.sqrt(8))  # llama.cpp: alpha/r == 16/sqrt(8)
    normalize_gguf(Path(report.out) / "adapter.gguf", tmp_path / "rs.gguf", base_name="smollm2-135m", alpha=alpha)
    assert GGUFReader(tmp_path / "rs.gguf").fields["adapter.lora.alpha"].contents() == pytest.approx(alpha)


def test_ollama_folder_is_portable_with_the_base_beside_the_modelfile(exported, trained, monkeypatch, tmp_path):
    from dlm.models.base import alias_gguf_path

    report, _ = exported
    doc_path, home = trained
    monkeypatch.setenv("DLM_HOME", str(home))
    ollama = export(doc_path, format="ollama", out=tmp_path / "ollama")
    out = Path(ollama.out)
    assert ollama.files == ("Modelfile", "SmolLM2-135M-Instruct.Q4_1.gguf", "adapter.gguf")
    assert (out / "adapter.gguf").read_bytes() == (Path(report.out) / "adapter.gguf").read_bytes()
    assert (out / "SmolLM2-135M-Instruct.Q4_1.gguf").read_bytes() == alias_gguf_path("smollm2-135m").read_bytes()
    modelfile = (out / "Modelfile").read_text()
    assert "/" + "/".join(Path(sys.prefix).parts[1:]) not in modelfile and str(tmp_path) not in modelfile
    lines = modelfile.splitlines()
    assert lines[0] == "FROM ./SmolLM2-135M-Instruct.Q4_1.gguf"
    assert lines[1] == "ADAPTER ./adapter.gguf"
    text = "\n".join(lines)
    assert 'TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n' in text
    assert 'PARAMETER stop "<|im_end|>"' in lines
    assert lines[-1] == 'SYSTEM """You answer in one sentence."""'
    assert ollama.command == f"ollama create notes -f {out / 'Modelfile'}"

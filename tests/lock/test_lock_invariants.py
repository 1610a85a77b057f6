"""Hashes the lock relies on: stable across processes, sensitive to what they cover."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from golden_tool import golden_tuple, tuple_hash
from lock_factory import FIXED_ENV
from tinyllama import tiny_llama

from dlm.canonical import canonical_json
from dlm.lock import adapter_sha256, canonicalize_adapter_dir, hyperparameters_sha256

HPARAMS = {"lora_r": 4, "learning_rate": 0.001, "target_modules": ["q_proj", "v_proj"], "seed": 1}

_CHILD = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from lock_factory import FIXED_ENV
from dlm.lock import adapter_sha256, hyperparameters_sha256
from golden_tool import golden_tuple, tuple_hash
out = {{
    "fixed_tuple": tuple_hash(golden_tuple(FIXED_ENV)),
    "hparams": hyperparameters_sha256(json.loads({hparams!r})),
    "adapter": adapter_sha256(Path({adapter!r})),
}}
if {real_env}:
    out["real_tuple"] = tuple_hash(golden_tuple())
print(json.dumps(out))
"""


def _child(adapter: Path, *, hash_seed: int, real_env: bool = False) -> dict:
    code = _CHILD.format(
        tests=str(Path(__file__).parent), hparams=json.dumps(HPARAMS), adapter=str(adapter), real_env=real_env
    )
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(proc.stdout)


def _fake_adapter(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "adapter_model.safetensors").write_bytes(bytes(range(256)) * 8)
    (root / "adapter_config.json").write_text('{"r": 4}\n')
    (root / "sub").mkdir()
    (root / "sub" / "extra.txt").write_text("nested\n")
    return root


def test_hashes_are_stable_across_processes(tmp_path: Path) -> None:
    adapter = _fake_adapter(tmp_path / "adapter")
    here = {
        "fixed_tuple": tuple_hash(golden_tuple(FIXED_ENV)),
        "hparams": hyperparameters_sha256(HPARAMS),
        "adapter": adapter_sha256(adapter),
        "real_tuple": tuple_hash(golden_tuple()),
    }
    first = _child(adapter, hash_seed=1, real_env=True)
    second = _child(adapter, hash_seed=2)
    assert first == here
    assert {k: v for k, v in here.items() if k != "real_tuple"} == second


def test_tuple_hash_changes_with_any_version_or_platform_part() -> None:
    base = golden_tuple(FIXED_ENV)
    seen = {tuple_hash(base)}
    versions = dict(base["versions"])
    for name in versions:
        bumped = {**base, "versions": sorted([k, v + ".post1" if k == name else v] for k, v in versions.items())}
        seen.add(tuple_hash(bumped))
    for key in base["platform"]:
        seen.add(tuple_hash({**base, "platform": {**base["platform"], key: "other"}}))
    with_bnb = {**base, "versions": sorted([*base["versions"], ["bitsandbytes", "0.45.0"]])}
    seen.add(tuple_hash(with_bnb))
    assert len(seen) == 1 + len(versions) + len(base["platform"]) + 1


def test_tuple_hash_ignores_version_dict_order() -> None:
    reordered = FIXED_ENV.__class__(
        **{**FIXED_ENV.__dict__, "versions": dict(reversed(list(FIXED_ENV.versions.items())))}
    )
    assert tuple_hash(golden_tuple(reordered)) == tuple_hash(golden_tuple(FIXED_ENV))


def test_hyperparameters_hash_ignores_key_order_not_values() -> None:
    assert hyperparameters_sha256(dict(reversed(list(HPARAMS.items())))) == hyperparameters_sha256(HPARAMS)
    assert hyperparameters_sha256({**HPARAMS, "lora_r": 8}) != hyperparameters_sha256(HPARAMS)
    assert hyperparameters_sha256({**HPARAMS, "out": Path("/a/b")}) == hyperparameters_sha256(
        {**HPARAMS, "out": "/a/b"}
    )
    with pytest.raises(TypeError):
        hyperparameters_sha256({"bad": object()})


# ---- adapter folder ------------------------------------------------------------------------------


def test_adapter_sha256_is_deterministic_and_covers_names_bytes_and_framing(tmp_path: Path) -> None:
    adapter = _fake_adapter(tmp_path / "a")
    digest = adapter_sha256(adapter)
    assert digest.startswith("sha256:") and len(digest) == 7 + 64
    assert adapter_sha256(adapter) == digest
    copy = _fake_adapter(tmp_path / "b")
    assert adapter_sha256(copy) == digest  # the folder's own path is not hashed

    (copy / "sub" / "extra.txt").write_text("nesteD\n")
    assert adapter_sha256(copy) != digest  # one byte
    (copy / "sub" / "extra.txt").write_text("nested\n")
    (copy / "sub" / "extra.txt").rename(copy / "sub" / "other.txt")
    assert adapter_sha256(copy) != digest  # a name
    (copy / "sub" / "other.txt").rename(copy / "sub" / "extra.txt")
    assert adapter_sha256(copy) == digest

    (copy / "adapter_config.json").write_text('{"r": 4}\nn')
    (copy / "sub" / "extra.txt").write_text("ested\n")
    assert adapter_sha256(copy) != digest  # same concatenated bytes, different split


def test_adapter_sha256_refuses_missing_or_empty_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        adapter_sha256(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError):
        adapter_sha256(tmp_path / "empty")


def _peft_like(folder: Path, modules: list[str], base: str, key_order: int) -> None:
    folder.mkdir(parents=True)
    config = {
        "r": 4,
        "target_modules": modules,
        "base_model_name_or_path": base,
        "peft_type": "LORA",
        "modules_to_save": None,
        "revision": None,
    }
    if key_order:
        config = dict(reversed(list(config.items())))
    (folder / "adapter_config.json").write_text(json.dumps(config, indent=2))
    (folder / "README.md").write_text(f"---\nbase_model: {base}\ntags:\n- base_model:adapter:{base}\n---\n")
    (folder / "adapter_model.safetensors").write_bytes(b"\x00" * 64)


def test_canonical_adapter_config(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _peft_like(a, ["v_proj", "q_proj", "o_proj", "k_proj"], "/home/x/.dlm/models/smollm2-135m", 0)
    _peft_like(b, ["k_proj", "o_proj", "v_proj", "q_proj"], "/opt/ci/models/smollm2-135m", 1)
    assert adapter_sha256(a) != adapter_sha256(b)
    canonicalize_adapter_dir(a)
    canonicalize_adapter_dir(b, base_model_name="smollm2-135m")
    assert adapter_sha256(a) == adapter_sha256(b)

    text = (a / "adapter_config.json").read_text()
    config = json.loads(text)
    assert text == canonical_json(config)
    assert config["target_modules"] == ["k_proj", "o_proj", "q_proj", "v_proj"]
    assert config["base_model_name_or_path"] == "smollm2-135m"
    for folder in (a, b):
        for path in folder.iterdir():
            if path.suffix in (".json", ".md"):
                assert "/home/" not in path.read_text() and "/opt/" not in path.read_text()

    before = adapter_sha256(a)
    canonicalize_adapter_dir(a)
    assert adapter_sha256(a) == before  # idempotent


def test_canonicalize_needs_a_config(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        canonicalize_adapter_dir(tmp_path)


_PEFT_CHILD = """
import sys
import torch
from peft import LoraConfig, get_peft_model
from transformers import LlamaConfig, LlamaForCausalLM
from dlm.lock import adapter_sha256, canonicalize_adapter_dir
base_dir, out = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = LlamaForCausalLM.from_pretrained(base_dir)
peft = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "up_proj"]))
peft.save_pretrained(out)
raw = adapter_sha256(out)
canonicalize_adapter_dir(out)
print(raw, adapter_sha256(out))
"""


@pytest.mark.slow
def test_real_peft_adapter_folder_hashes_the_same_in_fresh_processes(tmp_path: Path) -> None:
    """peft writes target_modules in set order, which follows PYTHONHASHSEED; after
    canonicalization two processes with different hash seeds leave identical folders."""
    tiny_llama(max_position_embeddings=2048).save_pretrained(tmp_path / "base")
    raw, digests = [], []
    for seed in (1, 2):
        out = tmp_path / f"adapter-{seed}"
        env = dict(os.environ, PYTHONHASHSEED=str(seed))
        proc = subprocess.run(
            [sys.executable, "-c", _PEFT_CHILD, str(tmp_path / "base"), str(out)],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        before, after = proc.stdout.strip().splitlines()[-1].split()
        raw.append(before)
        digests.append(after)
        assert str(tmp_path) not in (out / "adapter_config.json").read_text()
    assert len(set(digests)) == 1, digests
    # These two hash seeds put peft's target_modules in different orders, so the raw
    # folders differ: the check above really depends on canonicalization.
    assert len(set(raw)) == 2, raw

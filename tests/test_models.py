from pathlib import Path

import pytest

from dlm.errors import BaseModelError
from dlm.models import resolve_base_model
from dlm.tokenize.fingerprint import tokenizer_sha256


def test_alias_materializes_with_identity(smollm2_ref):
    assert (smollm2_ref.path / "config.json").is_file()
    assert smollm2_ref.revision.startswith("sha256:") and len(smollm2_ref.revision) == 71
    again = resolve_base_model("smollm2-135m")
    assert again.revision == smollm2_ref.revision


def test_digits_split_individually(smollm2_tokenizer):
    ids = smollm2_tokenizer("12345", add_special_tokens=False)["input_ids"]
    assert len(ids) == 5


def test_local_folder_resolves_to_same_weights(smollm2_ref):
    ref = resolve_base_model(str(smollm2_ref.path))
    assert ref.revision == smollm2_ref.revision


def test_folder_without_config_is_refused(tmp_path: Path):
    with pytest.raises(BaseModelError, match="no config.json"):
        resolve_base_model(str(tmp_path))


def test_offline_hub_id_says_how_to_point_at_a_folder():
    with pytest.raises(BaseModelError, match="local folder"):
        resolve_base_model("nobody-here/no-such-model-xyz")


def test_fingerprint_stable_and_sensitive(smollm2_tokenizer):
    a = tokenizer_sha256(smollm2_tokenizer)
    assert a == tokenizer_sha256(smollm2_tokenizer)
    original = smollm2_tokenizer.chat_template
    try:
        smollm2_tokenizer.chat_template = original + " "
        assert tokenizer_sha256(smollm2_tokenizer) != a
    finally:
        smollm2_tokenizer.chat_template = original


def test_a_remembered_fingerprint_is_the_computed_one_and_sees_a_backend_change(smollm2_ref):
    from dlm.models import load_tokenizer
    from dlm.tokenize import fingerprint

    tok = load_tokenizer(smollm2_ref)
    first = fingerprint.tokenizer_sha256(tok)
    fingerprint._memo.clear()
    assert fingerprint.tokenizer_sha256(tok) == first  # computed afresh
    assert fingerprint.tokenizer_sha256(tok) == first  # remembered
    tok.add_tokens(["<dlm-planted>"])  # the backend JSON changes, nothing else does
    assert fingerprint.tokenizer_sha256(tok) != first
    fingerprint._memo.clear()
    changed = fingerprint.tokenizer_sha256(tok)
    assert changed != first and fingerprint.tokenizer_sha256(tok) == changed


@pytest.mark.slow
def test_concurrent_first_use_builds_once_and_never_exposes_a_partial_folder(tmp_path: Path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, DLM_MODELS_DIR=str(tmp_path / "models"))
    code = "from dlm.models import resolve_base_model; print(resolve_base_model('smollm2-135m').revision)"
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)
    ]
    outs = [p.communicate(timeout=600)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert outs[0] == outs[1] and outs[0].startswith("sha256:")
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["smollm2-135m", "smollm2-135m.lock"]


def test_damaged_gguf_install_is_refused_with_the_reinstall_command(tmp_path: Path, monkeypatch):
    from dlm.models import base

    package = tmp_path / "site" / "dlm_test_damaged_gguf"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "model.gguf").write_bytes(b"PK\x03\x04" + bytes(64))  # a wheel's bytes where the GGUF should be
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(
        base.ALIASES, "damaged", base.AliasSpec("dlm_test_damaged_gguf", "model.gguf", "pip install damaged")
    )
    monkeypatch.setenv("DLM_MODELS_DIR", str(tmp_path / "models"))
    with pytest.raises(BaseModelError, match=r"model.gguf is not a GGUF file .*pip install damaged --force-reinstall"):
        resolve_base_model("damaged")
    assert not any((tmp_path / "models").glob("*damaged*/config.json"))

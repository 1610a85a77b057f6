"""Test isolation: every test gets its own empty DLM_HOME; base models are
materialized once per checkout under .dlm-test-models/ (shared, read-mostly)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DLM_MODELS_DIR", str(REPO / ".dlm-test-models"))


@pytest.fixture(autouse=True)
def dlm_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh DLM_HOME for every test."""
    home = tmp_path_factory.mktemp("dlm-home")
    monkeypatch.setenv("DLM_HOME", str(home))
    monkeypatch.delenv("DLM_CACHE_DIR", raising=False)  # the shared cache store follows DLM_HOME
    monkeypatch.delenv("DLM_CACHE_REMOTE", raising=False)
    return home


@pytest.fixture(scope="session")
def smollm2_ref():
    """The embedded SmolLM2-135M-Instruct, materialized once (about 30 s the first time)."""
    from dlm.models import resolve_base_model

    return resolve_base_model("smollm2-135m")


@pytest.fixture(scope="session")
def smollm2_tokenizer(smollm2_ref):
    """The real SmolLM2 fast tokenizer (digit splitting restored)."""
    from dlm.models import load_tokenizer

    return load_tokenizer(smollm2_ref)

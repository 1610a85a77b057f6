"""Test isolation: every test gets its own empty DLM_HOME; base models are
materialized once per checkout under .dlm-test-models/ (shared, read-mostly).

Parallel runs (`make test` runs `pytest -n auto`, pytest-xdist): each worker runs whole
test files (a module fixture such as a trained adapter is built once), tests/export/ as
one unit (its session fixture trains one adapter), the files that use the real SmolLM2
first so the short ones fill the end. Torch in each worker gets the worker's share of
the cores (`OMP_NUM_THREADS`, inherited by the `dlm` processes tests start): two
workers with two threads each on two cores spend more time waiting on each other than
computing. Without `-n` nothing of this applies."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DLM_MODELS_DIR", str(REPO / ".dlm-test-models"))
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):  # set before anything imports torch
    _workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    _cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, _cores // _workers)))
    # a worker starts with COLUMNS=80 and LINES=24, which would fix the width of the CLI's
    # consoles (`dlm.cli.reporter`) at import; a plain run leaves them to each test
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)

# test files that share one session fixture run in one worker (see the module docstring)
ONE_UNIT = ("tests/export/",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist: the files holding `integration` tests first, each file's tests kept
    together in their order (the workers hand out files in this order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    heavy = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("integration")}
    order = {path: i for i, path in enumerate(dict.fromkeys(item.nodeid.split("::", 1)[0] for item in items))}
    items.sort(key=lambda item: (item.nodeid.split("::", 1)[0] not in heavy, order[item.nodeid.split("::", 1)[0]]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Hand out whole files, tests/export/ as one unit, in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return next((unit for unit in ONE_UNIT if path.startswith(unit)), path)

    config.option.loadscopereorder = False  # keep the order pytest_collection_modifyitems chose
    return FileScheduling(config, log)


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

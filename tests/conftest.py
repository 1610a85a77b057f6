"""Test isolation: every test gets its own empty DLM_HOME; base models are
materialized once per checkout under .dlm-test-models/ (shared, read-mostly).

Parallel runs (`make test` runs `pytest -n auto`, pytest-xdist): each worker runs whole
test files (a module fixture such as a trained adapter is built once), tests/export/ as
one unit (its session fixture trains one adapter), longest first by `tests/durations.json`
(seconds per unit from a whole run, `make test-durations`), so the short ones fill the
end and the workers finish together; a unit not listed there counts as long when it
holds `integration` tests (they train or serve the real SmolLM2), else as short. Torch
in each worker gets the worker's share of the cores (`OMP_NUM_THREADS`, inherited by the
`dlm` processes tests start): two workers with two threads each on two cores spend more
time waiting on each other than computing. Without `-n` nothing of this applies."""

from __future__ import annotations

import json
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
DURATIONS = REPO / "tests" / "durations.json"
# seconds assumed for a unit missing from DURATIONS: one with integration tests, another
UNLISTED_INTEGRATION_S, UNLISTED_S = 60.0, 1.0


def scheduling_unit(path: str) -> str:
    """The unit a test file is handed out in: its path, or the ONE_UNIT folder holding it."""
    return next((unit for unit in ONE_UNIT if path.startswith(unit)), path)


def _durations() -> dict[str, float]:
    try:
        return {str(k): float(v) for k, v in json.loads(DURATIONS.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError):
        return {}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist: units longest first (module docstring), each file's tests kept together
    in their order (the workers hand out units in this order)."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    known = _durations()
    units = {item: scheduling_unit(item.nodeid.split("::", 1)[0]) for item in items}
    heavy = {units[item] for item in items if item.get_closest_marker("integration")}
    first_seen = {unit: i for i, unit in enumerate(dict.fromkeys(units.values()))}

    def seconds(unit: str) -> float:
        return known.get(unit, UNLISTED_INTEGRATION_S if unit in heavy else UNLISTED_S)

    items.sort(key=lambda item: (-seconds(units[item]), first_seen[units[item]]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Hand out whole units (`scheduling_unit`) in the order `pytest_collection_modifyitems` chose."""
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return scheduling_unit(nodeid.split("::", 1)[0])

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

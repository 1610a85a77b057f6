"""Every script under benchmarks/ still imports against today's dlm: a renamed or removed
name fails here, not months later when someone reruns a measurement. Importing runs no
benchmark (each script runs under `if __name__ == "__main__"`)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py")))
def test_benchmark_script_imports(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCHMARKS))  # scripts import their siblings
    name = f"benchmark_{Path(script).stem}"
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    assert callable(getattr(module, "main", None)), f"{script} has no main()"

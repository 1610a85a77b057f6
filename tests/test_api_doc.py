"""docs/api.md's example runs as written: the Python API without typer or rich."""

import re
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def example_code() -> str:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## Example", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.S)
    assert match, "docs/api.md: no python block under '## Example'"
    return match.group(1)


@pytest.mark.integration
def test_api_example_runs(tmp_path, monkeypatch, smollm2_ref):
    monkeypatch.chdir(tmp_path)
    exec(compile(example_code(), str(DOC), "exec"), {"__name__": "api_example"})
    assert (tmp_path / "notes.dlm").is_file()


def test_api_names_resolve_lazily():
    """Every name the table documents exists, and cache/show actions load without torch."""
    import subprocess

    code = (
        "import sys; from dlm.actions import cache_show, show, metrics, doctor, init; "
        "print(sorted(m for m in ('torch', 'typer', 'rich') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    import dlm.actions as actions

    for name in actions.__all__:
        assert callable(getattr(actions, name)), name

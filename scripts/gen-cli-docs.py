"""Write docs/cli.md from the live CLI's --help (tests/test_cli_docs.py keeps it true).

Usage: python scripts/gen-cli-docs.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

from typer.main import get_command  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from dlm.cli.main import app  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "cli.md"


def _help(args: list[str]) -> str:
    # rich sizes help to COLUMNS when output is not a terminal; fix it so the file is stable
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": "100", "NO_COLOR": "1"})
    return "\n".join(line.rstrip() for line in result.output.strip().splitlines())


def render() -> str:
    """The whole reference: top-level help, then each command's (and sub-command's)."""
    parts = ["# CLI reference", "", "Generated from the live CLI by `python scripts/gen-cli-docs.py`.", ""]
    parts += ["## dlm", "", "```", _help([]), "```", ""]
    root = get_command(app)
    for name in sorted(root.commands):  # type: ignore[attr-defined]
        command = root.commands[name]  # type: ignore[attr-defined]
        parts += [f"## dlm {name}", "", "```", _help([name]), "```", ""]
        for sub in sorted(getattr(command, "commands", {}) or {}):
            parts += [f"### dlm {name} {sub}", "", "```", _help([name, sub]), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if DOC.read_text() == text else 1)
    DOC.write_text(text)
    print(f"wrote {DOC}")

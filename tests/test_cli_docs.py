import runpy
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_docs_cli_md_matches_live_help():
    module = runpy.run_path(str(REPO / "scripts" / "gen-cli-docs.py"))
    expected = module["render"]()
    assert (REPO / "docs" / "cli.md").read_text() == expected, (
        "docs/cli.md is stale: run `python scripts/gen-cli-docs.py`"
    )

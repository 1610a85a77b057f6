"""Write `tests/durations.json`: seconds per scheduling unit (a test file, or tests/export/
as one) from a JUnit XML report of a whole-suite run, which `tests/conftest.py` uses to
hand the longest units out first under pytest-xdist.

    python -m pytest -n auto --junitxml=/tmp/suite.xml && python scripts/test-durations.py /tmp/suite.xml
    (or: make test-durations)

A JUnit `time` covers a test's setup, call and teardown, so a module fixture's cost
lands on the test that first asks for it and the file's sum is what the file costs a
worker. Figures are rounded to 0.1 s; only the order matters.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from conftest import DURATIONS, scheduling_unit  # noqa: E402


def main(report: Path) -> None:
    totals: dict[str, float] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        path = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        if not path.startswith("tests/"):
            continue
        # a class-based test's classname is its module path and the class: drop the class
        while not (REPO / path).is_file() and "/" in path:
            path = path.rsplit("/", 1)[0] + ".py"
        unit = scheduling_unit(path)
        totals[unit] = totals.get(unit, 0.0) + float(case.get("time") or 0.0)
    ordered = dict(sorted(((u, round(s, 1)) for u, s in totals.items()), key=lambda item: -item[1]))
    DURATIONS.write_text(json.dumps(ordered, indent=1) + "\n", encoding="utf-8")
    print(f"{DURATIONS.relative_to(REPO)}: {len(ordered)} units, {sum(ordered.values()):.0f} s of test time")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(Path(sys.argv[1]))

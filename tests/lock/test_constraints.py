"""constraints.txt pins the lock's packages, and the golden is recorded for exactly that set."""

from __future__ import annotations

import json
import re
from pathlib import Path

from dlm.lock.environment import PINNED_PACKAGES, pinned_versions

REPO = Path(__file__).resolve().parents[2]
CONSTRAINTS = REPO / "constraints.txt"
INDEX = REPO / ".determinism" / "lock.json"


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _release(version: str) -> str:
    """A version without its local build label (`2.13.0+cpu` -> `2.13.0`)."""
    return version.split("+", 1)[0]


def constraints() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in CONSTRAINTS.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, sep, version = line.partition("==")
            assert sep and version, f"constraints.txt: {line!r} is not an exact pin"
            assert _norm(name) not in pins, f"constraints.txt pins {name} twice"
            pins[_norm(name)] = version
    return pins


def test_every_line_is_an_exact_pin_without_build_labels():
    pins = constraints()
    assert len(pins) > len(PINNED_PACKAGES)
    assert all("+" not in v for v in pins.values()), "local labels (+cpu) are left to the index"
    assert "dlm" not in pins


def test_the_lock_packages_are_pinned():
    missing = [name for name in PINNED_PACKAGES if _norm(name) not in constraints()]
    assert missing == [], f"constraints.txt lacks {missing}: rerun scripts/gen-constraints.py"


def test_a_golden_exists_for_the_pinned_set_on_x86_64_avx2():
    pins = constraints()
    wanted = {name: pins[_norm(name)] for name in PINNED_PACKAGES}
    tuples = json.loads(INDEX.read_text())["tuples"].values()
    matching = [
        t
        for t in tuples
        if {name: _release(v) for name, v in t["versions"]} == wanted
        and {key: value for key, value in t["platform"].items() if key != "cpu_vendor"}
        == {
            "system": "Linux",
            "machine": "x86_64",
            "cpu_capability": "AVX2",
            "hardware_tier": "cpu",
            "torch_threads": 1,
        }
    ]
    assert matching, (
        f"no golden in {INDEX.relative_to(REPO)} for the pinned set {wanted} on Linux x86_64 "
        "AVX2: after changing constraints.txt, record one with "
        "`python scripts/regen-determinism-golden.py --approve`"
    )


def test_this_venv_has_the_pinned_versions():
    pins = constraints()
    installed = {name: _release(v) for name, v in pinned_versions().items() if name in PINNED_PACKAGES}
    drift = {name: (v, pins[_norm(name)]) for name, v in installed.items() if v != pins[_norm(name)]}
    assert drift == {}, (
        f"installed vs constraints.txt: {drift}; reinstall with `make install` "
        "(or regenerate constraints.txt and the golden together)"
    )

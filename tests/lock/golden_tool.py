"""Golden adapter hashes per version tuple: the repository's determinism regression check.

Repository tooling, not part of the installed package: `tests/lock/test_golden.py` and
`scripts/regen-determinism-golden.py` import it.

A *tuple* is what decides the bytes of a trained adapter besides the inputs: the pinned
package versions and the platform (OS, CPU architecture, torch's CPU capability, the
CPU's vendor, the hardware tier, and the thread count the golden runs are pinned to). Its hash:

    tuple_hash = "sha256:" + sha256(canonical JSON of
                 {"format": GOLDEN_FORMAT, "versions": [[name, version], ...sorted],
                  "platform": {...}})

Files (paths relative to the repository root):

    .determinism/lock.json                      index: {"format", "document",
                                                "tuples": {tuple_hash: {"file", "adapter_sha256",
                                                "platform", "versions"}}}
    tests/golden/determinism/golden.dlm         the fixed tiny document
    tests/golden/determinism/tuple-<16 hex>.json one tuple: {"format", "tuple_hash", "tuple",
                                                "document", "document_sha256", "adapter_sha256"}

Both are canonical JSON written atomically. A golden run is `python -m dlm train
golden.dlm --json` in a fresh process with a fresh `DLM_HOME`, one torch thread
(`GOLDEN_THREADS`) and a distinct `PYTHONHASHSEED` per run, so hash-order leaks show up.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.atomic import atomic_write_json
from dlm.canonical import canonical_json, canonical_sha256
from dlm.cpu_isa import cpu_vendor, decide, read_cpu_flags, read_cpuinfo
from dlm.lock.environment import Environment, capture_environment

GOLDEN_FORMAT = "dlm-golden-v1"
GOLDEN_THREADS = 1
INDEX_PATH = Path(".determinism/lock.json")
GOLDEN_DIR = Path("tests/golden/determinism")
GOLDEN_DOC = GOLDEN_DIR / "golden.dlm"


def golden_tuple(env: Environment | None = None, vendor: str | None = None) -> dict[str, Any]:
    """The tuple of `env` and `vendor`, by default this machine's: `{"versions": [[name,
    version], ...], "platform": {...}}`. The CPU's vendor is part of it: with the ISA
    pinned to AVX2 on both, an Intel and an AMD CPU were measured to train different
    float32 bytes (docs/determinism.md), so each vendor has its own golden."""
    if env is None:
        env, vendor = capture_environment(), cpu_vendor(read_cpuinfo())
    return {
        "versions": sorted([name, version] for name, version in env.versions.items()),
        "platform": {
            "system": env.system,
            "machine": env.machine,
            "cpu_capability": env.cpu_capability,
            "cpu_vendor": vendor,
            "hardware_tier": env.hardware_tier,
            "torch_threads": GOLDEN_THREADS,
        },
    }


def golden_required(env: Environment | None = None) -> bool:
    """Whether this machine must have a golden: x86-64 Linux with AVX2 or better, the
    machines `dlm.cpu_isa` pins to AVX2, so one golden serves AVX2 and AVX512 CPUs alike.
    Elsewhere (arm64, macOS, an x86 CPU without AVX2) a missing golden may be skipped."""
    env = env or capture_environment()
    pinnable = decide({}, system=env.system, machine=env.machine, flags=read_cpu_flags())
    return pinnable.mode == "pinned"


def tuple_hash(tup: dict[str, Any]) -> str:
    """`sha256:<hex>` of a `golden_tuple` (module docstring)."""
    payload = {"format": GOLDEN_FORMAT, **tup}
    return canonical_sha256(payload)


def tuple_file(repo: Path, thash: str) -> Path:
    """`tests/golden/determinism/tuple-<first 16 hex>.json` under `repo`."""
    return repo / GOLDEN_DIR / f"tuple-{thash.removeprefix('sha256:')[:16]}.json"


def file_sha256(path: Path) -> str:
    """`sha256:<hex>` of a file's bytes."""
    return "sha256:" + hashlib.sha256(Path(path).read_bytes()).hexdigest()


@dataclass(frozen=True)
class GoldenRecord:
    """One stored golden: the tuple, its hash, the document's hash and the adapter's."""

    tuple_hash: str
    tuple: dict[str, Any]
    document_sha256: str
    adapter_sha256: str

    def to_json(self) -> dict[str, Any]:
        return {
            "format": GOLDEN_FORMAT,
            "tuple_hash": self.tuple_hash,
            "tuple": self.tuple,
            "document": GOLDEN_DOC.as_posix(),
            "document_sha256": self.document_sha256,
            "adapter_sha256": self.adapter_sha256,
        }


def read_record(path: Path, kind: type[GoldenRecord] = GoldenRecord) -> GoldenRecord | None:
    """The golden stored at `path` as a `kind`, or None when there is none."""
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return kind(
        tuple_hash=data["tuple_hash"],
        tuple=data["tuple"],
        document_sha256=data["document_sha256"],
        adapter_sha256=data["adapter_sha256"],
    )


def read_golden(repo: Path, thash: str) -> GoldenRecord | None:
    """The stored golden for `thash`, or None when this tuple has none."""
    return read_record(tuple_file(repo, thash))


def write_golden(repo: Path, record: GoldenRecord) -> Path:
    """Write the tuple file and update the index; returns the tuple file's path."""
    path = tuple_file(repo, record.tuple_hash)
    atomic_write_json(path, record.to_json())
    index_path = repo / INDEX_PATH
    index = json.loads(index_path.read_text()) if index_path.is_file() else {}
    tuples = dict(index.get("tuples", {}))
    tuples[record.tuple_hash] = {
        "file": path.relative_to(repo).as_posix(),
        "adapter_sha256": record.adapter_sha256,
        "platform": record.tuple["platform"],
        "versions": record.tuple["versions"],
    }
    atomic_write_json(index_path, {"format": GOLDEN_FORMAT, "document": GOLDEN_DOC.as_posix(), "tuples": tuples})
    return path


def golden_env(home: Path, *, hash_seed: int, base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for one golden run: fresh `DLM_HOME`, one thread, offline, a fixed hash seed.

    `DLM_MODELS_DIR` is inherited from `base` (default `os.environ`) so runs share the
    materialized base model.
    """
    env = dict(os.environ if base is None else base)
    env.update(
        DLM_HOME=str(home),
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        OMP_NUM_THREADS=str(GOLDEN_THREADS),
        MKL_NUM_THREADS=str(GOLDEN_THREADS),
        PYTHONHASHSEED=str(hash_seed),
    )
    return env


def run_train(
    doc: Path, env: dict[str, str], *, extra_args: tuple[str, ...] = (), timeout_s: float = 600
) -> dict[str, Any]:
    """Run `python -m dlm train DOC --json` in a fresh process; return its JSON object.

    Raises:
        RuntimeError: the process failed or printed no JSON object (stderr tail included).
    """
    cmd = [sys.executable, "-m", "dlm", "train", str(doc), "--json", *extra_args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-4000:]}{proc.stdout[-2000:]}")
    return parse_json_stdout(proc.stdout)


def parse_json_stdout(stdout: str) -> dict[str, Any]:
    """The JSON object a `--json` command printed (whole stdout, else its last `{` line)."""
    text = stdout.strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        lines = [ln for ln in text.splitlines() if ln.startswith("{")]
        if not lines:
            raise RuntimeError(f"no JSON object on stdout: {text[-2000:]!r}") from None
        value = json.loads(lines[-1])
    if not isinstance(value, dict):
        raise RuntimeError(f"expected a JSON object on stdout, got {type(value).__name__}")
    return value


def describe(record: GoldenRecord) -> str:
    """Canonical JSON text of a record (what the regen script prints)."""
    return canonical_json(record.to_json())


def settle(
    repo: Path, old: GoldenRecord | None, new: GoldenRecord, target: Path, approve: bool, write: Callable[[], str]
) -> int:
    """The end of a regen script: show the stored and the new adapter hash, and when they
    differ and `approve` is set, call `write` (it returns what it wrote, to print).
    Returns the script's exit status (0: unchanged, dry run or written)."""
    print(f"stored: {old.adapter_sha256 if old else 'none'}")
    print(f"new:    {new.adapter_sha256}")
    if old == new:
        print("golden unchanged")
        return 0
    if not approve:
        print(f"dry run: rerun with --approve to write {target.relative_to(repo)}")
        return 0
    print(f"wrote {write()}")
    return 0

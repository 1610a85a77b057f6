"""What an adapter learns from a document: six `.dlm` documents about made-up codebases
(`benchmarks/learning/<name>/`: Python, Go, Rust, TypeScript, C, Java), each trained by a real
`dlm train --json` with every training setting at its default, in a fresh temporary
`DLM_HOME` (the base models from `$DLM_MODELS_DIR`, else this home's), offline.

Each document has eight `::instruction::` pairs and twelve probes; its `expect.json`
names each probe's class by its question: `reworded` (the index, from 0, of the pair
it asks again in other words) or `fact` with the one place its answer is written
(`prose` of the `.dlm`, `readme`: Markdown in the sources, `code`, `config`). The
table has one line per document: the pairs as written, the rewordings, the facts (and
which of them passed), the general-set NLL change, the general probes, the training
seconds, the padding and loss-carrying shares of the tokens, and the precision. Each
run's record (the report, the lock, the wall time, the machine) is saved as
`<reports>/<name>.json`; `--report-only DIR` prints the table from such records.
`--seed N` trains copies of the documents with `training.seed: N`: one run is one draw
of the data order and the LoRA init, and a second seed shows how far a score moves by
chance. `--set KEY=VALUE` does the same for any training setting, so two recipes are
compared on the same documents and seeds without editing a default. `--root DIR` judges
another folder of documents laid out the same way, such as documents written after the
recipe was settled.

    PYTHONPATH=src python benchmarks/learning.py [--docs tarnwick brindle] [--fp32] [--seed N]
        [--set learning_rate=2e-3] [--root DIR] [--out results.json]
    PYTHONPATH=src python benchmarks/learning.py --report-only DIR
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "benchmarks" / "learning"
SOURCES = ("prose", "readme", "code", "config")
COLUMNS = (
    "doc",
    "language",
    "pairs",
    "reworded (base)",
    "facts",
    "facts passed",
    "general NLL",
    "guard peak",
    "general probes",
    "forgotten",
    "train s",
    "padding",
    "loss tokens",
    "precision",
)


@dataclass(frozen=True)
class Line:
    """One document's line of the table (counts are adapter passes out of the class's total)."""

    doc: str
    language: str
    pairs: str
    reworded: str
    facts: str
    facts_passed: str
    general_change: str
    guard_peak: str
    general_probes: str
    forgotten: str
    train_seconds: str
    padding: str
    loss_tokens: str
    precision: str


def doc_names(root: Path = DOCS) -> list[str]:
    """The documents of the benchmark: every folder of `root` (`benchmarks/learning/`)
    with an `expect.json`."""
    return sorted(p.parent.name for p in root.glob("*/expect.json"))


def load_expect(name: str, root: Path = DOCS) -> dict[str, Any]:
    """`<root>/<name>/expect.json`: `{"language", "probes": [{"question",
    "class": "reworded", "pair"} | {"question", "class": "fact", "source"}]}`."""
    data: dict[str, Any] = json.loads((root / name / "expect.json").read_text(encoding="utf-8"))
    return data


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo, else the machine type."""
    info = Path("/proc/cpuinfo")
    if info.exists():
        for line in info.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.machine()


def machine_line(env: dict[str, str]) -> str:
    """This machine, as the table's heading says it: CPU, cores, torch threads, the CPU's
    bfloat16 instructions and whether `DLM_CPU_BF16=0` turns them off for `auto`."""
    from dlm.cpu_isa import read_cpu_flags
    from dlm.train.precision import CPU_BF16_ENV, CPU_BF16_FLAGS

    flags = [f for f in CPU_BF16_FLAGS if f in read_cpu_flags()]
    bf16 = ", ".join(flags) if flags else "no bfloat16 instructions"
    if flags and env.get(CPU_BF16_ENV, "").strip() == "0":
        bf16 += f" (off: {CPU_BF16_ENV}=0)"
    threads = env.get("OMP_NUM_THREADS", "default")
    return f"{cpu_model()}; {os.cpu_count()} cores; OMP_NUM_THREADS={threads}; {bf16}"


def child_env(home: Path, fp32: bool) -> dict[str, str]:
    """The environment of one `dlm train`: a fresh `DLM_HOME`, the base models where this
    process finds them, no shared cache, offline; `DLM_CPU_BF16=0` with `fp32`."""
    from dlm.paths import models_dir

    env = dict(os.environ, DLM_HOME=str(home), DLM_MODELS_DIR=str(models_dir()), HF_HUB_OFFLINE="1")
    for name in ("DLM_CACHE_DIR", "DLM_CACHE_REMOTE"):
        env.pop(name, None)
    if fp32:
        env["DLM_CPU_BF16"] = "0"
    return env


def settings_copy(name: str, settings: dict[str, str], folder: Path, root: Path = DOCS) -> Path:
    """Document `name`'s folder copied under `folder`, each `settings` key written under
    its frontmatter's `training:` with its value as YAML text (`{"seed": "7"}` gives
    `seed: 7`: data order, LoRA init, dropout; `{"learning_rate": "2e-3"}`); the path of
    the copied `.dlm`. The sources stay beside it, so relative `training.sources` find
    the same files.

    Raises:
        ValueError: the document has no `training:` line, or sets a key of `settings`
            itself (the copy would hold it twice).
    """
    copy = folder / name
    shutil.copytree(root / name, copy)
    doc = copy / f"{name}.dlm"
    text = doc.read_text(encoding="utf-8")
    if "\ntraining:\n" not in text:
        raise ValueError(f"{doc}: no `training:` line in the frontmatter to add settings under")
    taken = sorted(key for key in settings if f"\n  {key}:" in text)
    if taken:
        raise ValueError(f"{doc}: the document sets training.{taken[0]} itself; edit it there")
    lines = "".join(f"  {key}: {value}\n" for key, value in settings.items())
    doc.write_text(text.replace("\ntraining:\n", f"\ntraining:\n{lines}", 1), encoding="utf-8")
    return doc


def parse_settings(pairs: list[str]) -> dict[str, str]:
    """`--set KEY=VALUE` arguments as a dict, in order (`["learning_rate=2e-3"]`).

    Raises:
        ValueError: an argument has no `=`, or an empty key or value.
    """
    settings: dict[str, str] = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise ValueError(f"--set {pair!r}: expected KEY=VALUE, a training setting (learning_rate=2e-3)")
        settings[key.strip()] = value.strip()
    return settings


def train(name: str, fp32: bool, settings: dict[str, str] | None = None, root: Path = DOCS) -> dict[str, Any]:
    """One real `dlm train --json` of document `name` of `root` (with `settings`: of a
    copy with those training settings, `settings_copy`): `train_document`'s record."""
    settings = settings or {}
    with tempfile.TemporaryDirectory(prefix="dlm-learning-") as tmp:
        doc = settings_copy(name, settings, Path(tmp, "docs"), root) if settings else root / name / f"{name}.dlm"
        return train_document(name, doc, Path(tmp), fp32, settings)


def train_document(name: str, doc: Path, home: Path, fp32: bool, settings: dict[str, str]) -> dict[str, Any]:
    """One real `dlm train DOC --json` with `home` as its fresh `DLM_HOME` (`child_env`):
    the record (`doc` = `name`, `report`, `lock`, `wall_seconds`, `machine`, `fp32`,
    `settings` as given), or `error` with the last lines of stderr."""
    env = child_env(home, fp32)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "dlm", "train", str(doc), "--json"], env=env, capture_output=True, text=True
    )
    record: dict[str, Any] = {
        "doc": name,
        "wall_seconds": round(time.perf_counter() - start, 1),
        "machine": machine_line(env),
        "fp32": fp32,
        "settings": settings,
    }
    if done.returncode != 0:
        return {**record, "error": done.stderr.strip().splitlines()[-5:]}
    record["report"] = json.loads(done.stdout)
    locks = list(Path(home, "store").glob("*/dlm.lock"))
    record["lock"] = json.loads(locks[0].read_text(encoding="utf-8")) if locks else None
    return record


def _share(value: float | None) -> str:
    return f"{100 * value:.1f}%" if value is not None else "n/a"


def summarize(record: dict[str, Any], expect: dict[str, Any]) -> Line:
    """The table line of one saved run `record` (`train`'s result) judged by `expect`.

    Raises:
        KeyError: a probe of `expect` is missing from the report, or the record has no report.
    """
    report = record["report"]
    evaluation = report["evaluation"] or {}
    items = {i["question"]: i for i in evaluation.get("items", []) if i["kind"] == "probe"}
    reworded = [items[p["question"]] for p in expect["probes"] if p["class"] == "reworded"]
    facts = [(p["source"], items[p["question"]]) for p in expect["probes"] if p["class"] == "fact"]
    inst = evaluation.get("kinds", {}).get("instruction")
    passed_facts = [source for source, item in facts if item["passed"]["adapter"]]
    general = evaluation.get("general")
    probes = evaluation.get("general_probes")
    lock = record.get("lock") or {}
    return Line(
        doc=record["doc"],
        language=expect["language"],
        pairs=f"{inst['passed']['adapter']}/{inst['total']}" if inst else "n/a",
        reworded=f"{sum(i['passed']['adapter'] for i in reworded)}/{len(reworded)} "
        f"({sum(i['passed']['base'] for i in reworded)})",
        facts=f"{len(passed_facts)}/{len(facts)}",
        facts_passed=", ".join(passed_facts) or "-",
        general_change=f"{general['change_pct']:+.2f}%" if general else "n/a",
        guard_peak=_guard_peak(report.get("guard")),
        general_probes=_general_probes(probes),
        forgotten=_forgotten(probes),
        train_seconds=f"{report['train_seconds']:.0f} ({record['wall_seconds']:.0f} wall)",
        padding=_share(report.get("padding_fraction")),
        loss_tokens=_share(report.get("real_token_fraction")),
        precision=lock.get("precision", "n/a"),
    )


def _general_probes(probes: dict[str, Any] | None) -> str:
    """The general probes the base passes -> of those, the adapter's passes, and the
    change of the NLL of the base's replies where the report has it: "14 -> 11, replies
    +12.5%"."""
    if not probes:
        return "n/a"
    counts = f"{probes['passed']['base']} -> {probes['passed']['adapter']}"
    nll = probes.get("reply_nll")
    return f"{counts}, replies {nll['change_pct']:+.1f}%" if nll else counts


def _forgotten(probes: dict[str, Any] | None) -> str:
    """The general probes forgotten, then the flips the drawn replies did not
    confirm (`dlm.judge.forgetting`): "code-add (not confirmed: unit-cm-in-meter)"; "n/a" without
    general probes."""
    if not probes:
        return "n/a"
    tipped = [pid for pid in probes.get("flipped", []) if pid not in probes["forgotten"]]
    return (", ".join(probes["forgotten"]) or "-") + (f" (not confirmed: {', '.join(tipped)})" if tipped else "")


def _guard_peak(guard: dict[str, Any] | None) -> str:
    """The early stop's highest measurement during training, "+3.60% (step 21)"; where it
    stopped the run, "stopped at N"; "n/a" when it did not measure."""
    if not guard or not guard["changes"]:
        return "n/a"
    if guard["stopped_at"] is not None:
        return f"stopped at {guard['stopped_at']}"
    step, change = max(guard["changes"], key=lambda sc: sc[1])
    return f"{change:+.2f}% (step {step})"


def table(lines: list[Line]) -> list[str]:
    """The lines as a Markdown table (header, rule, one row per document)."""
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    out += ["| " + " | ".join(str(v) for v in asdict(line).values()) + " |" for line in lines]
    return out


def read_records(folder: Path, names: list[str]) -> list[dict[str, Any]]:
    """The saved records `<folder>/<name>.json` of `names` that exist (`--report-only`)."""
    return [
        json.loads((folder / f"{n}.json").read_text(encoding="utf-8")) for n in names if (folder / f"{n}.json").exists()
    ]


def run_settings(record: dict[str, Any]) -> dict[str, str]:
    """The training settings a saved run changed (`--set`, `--seed`); a record written
    before `--set` existed names its seed alone."""
    if "settings" in record:
        return dict(record["settings"])
    return {"seed": str(record["seed"])} if record.get("seed") is not None else {}


def render(records: list[dict[str, Any]], root: Path = DOCS) -> list[str]:
    """What the command prints for `records` of documents of `root`: the machine line,
    then the table; a run that failed is one line with its error."""
    out = [f"machine: {records[0]['machine']}" if records else "no records"]
    settings = {key: value for r in records for key, value in run_settings(r).items()}
    if settings:
        out.append("settings: " + ", ".join(f"{key}={value}" for key, value in settings.items()))
    done = [r for r in records if "report" in r]
    out += [f"{r['doc']}: failed: {' / '.join(r['error'])}" for r in records if "report" not in r]
    if done:
        out += table([summarize(r, load_expect(r["doc"], root)) for r in done])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", nargs="*", help=f"documents (default: all of {', '.join(doc_names())})")
    parser.add_argument(
        "--root",
        type=Path,
        default=DOCS,
        help="a folder of documents laid out as benchmarks/learning/ (<name>/<name>.dlm, <name>/expect.json), "
        "to judge documents the recipe was not tuned on",
    )
    parser.add_argument("--fp32", action="store_true", help="DLM_CPU_BF16=0: `precision: auto` trains in float32")
    parser.add_argument("--out", type=Path, help="write the records and table lines as JSON here")
    parser.add_argument("--reports", type=Path, help="save each run's record here (default: a new temporary folder)")
    parser.add_argument("--report-only", type=Path, metavar="DIR", help="print the table from records saved in DIR")
    parser.add_argument(
        "--seed", type=int, help="train each document with this training.seed (default: the document's, 42)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="train each document with this training setting (repeatable): --set learning_rate=2e-3",
    )
    args = parser.parse_args()
    try:
        settings = parse_settings(args.set)
    except ValueError as err:
        parser.error(str(err))
    if args.seed is not None:
        settings["seed"] = str(args.seed)
    known = doc_names(args.root)
    names = args.docs or known
    unknown = sorted(set(names) - set(known))
    if unknown or not names:
        parser.error(f"{args.root}: unknown documents {unknown}; choose among {known}")
    if args.report_only:
        records = read_records(args.report_only, names)
    else:
        folder = args.reports or Path(tempfile.mkdtemp(prefix="dlm-learning-reports-"))
        folder.mkdir(parents=True, exist_ok=True)
        records = []
        for name in names:
            record = train(name, args.fp32, settings, args.root)
            (folder / f"{name}.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
            print(f"{name}: {record['wall_seconds']:.0f} s wall", file=sys.stderr, flush=True)
            records.append(record)
        print(f"records: {folder}", file=sys.stderr)
    lines = render(records, args.root)
    print("\n".join(lines))
    if args.out:
        args.out.write_text(json.dumps({"records": records, "table": lines}, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Facts of a whole tree: dispatch by path, determinism, the probe split, and how they
reach `build_rows` and `dlm show`."""

from __future__ import annotations

import json
import random
from pathlib import Path

from typer.testing import CliRunner

from dlm.doc.schema import SYNTH_KINDS
from dlm.rows.facts.files import parsed_facts, source_kind, wanted_file
from dlm.rows.facts.model import FACT_KINDS
from dlm.rows.synth import synthesize

GO = """package retry

// MaxRetries is how many times Do tries a call.
const MaxRetries = 5

// DefaultHost is the host dialled when none is given.
const DefaultHost = "localhost"

// Do calls fn until it succeeds.
func Do(ctx context.Context, fn func() error) error { return nil }
"""
README = "# Ferry\n\nFerry listens on port 8080 by default. It keeps 64 MB of journal in `/var/lib/ferry`.\n"
YAML = "server:\n  host: ferry.local\n  port: 8080\nstorage:\n  rotate_mb: 64\n"
TREE = {"retry/retry.go": GO, "README.md": README, "config/ferry.yaml": YAML}


def test_schema_kinds_are_the_fact_kinds():
    assert SYNTH_KINDS == FACT_KINDS


def test_readers_by_path():
    assert [source_kind(p) for p in ("a.py", "a.go", "b.rs", "c.tsx", "d.mjs", "README", "e.yml", "f.cfg", "g.sh")] == [
        "python",
        "go",
        "rust",
        "typescript",
        "javascript",
        "markdown",
        "yaml",
        "ini",
        None,
    ]
    assert not wanted_file("node_modules/x/index.js") and not wanted_file(".github/workflows/ci.yaml")
    assert not wanted_file("pkg/testdata/conf.json") and wanted_file("docs/setup.md")


def facts_of(tree: dict[str, str]) -> list:
    facts = []
    for relpath, text in tree.items():
        got = parsed_facts(relpath, text)
        assert isinstance(got, list), got
        facts += got
    return facts


def test_same_tree_in_any_order_gives_the_same_pairs():
    first = synthesize(facts_of(TREE), probe_share=0.3)
    for seed in range(5):
        items = list(TREE.items())
        random.Random(seed).shuffle(items)
        facts = facts_of(dict(items))
        random.Random(seed).shuffle(facts)
        again = synthesize(facts, probe_share=0.3)
        assert again == first
    kinds = {f.kind for f, _ in first.train} | {f.kind for f, _, _ in first.probes}
    assert kinds == {"where", "purpose", "signature", "value", "statement", "setting"}


def test_all_facts_of_a_subject_fall_on_one_side():
    drawn = synthesize(facts_of(TREE), probe_share=0.5)
    trained = {(f.path, f.subject) for f, _ in drawn.train}
    probed = {(f.path, f.subject) for f, _, _ in drawn.probes}
    assert trained and probed and not trained & probed
    readme = [f for f in facts_of(TREE) if f.path == "README.md"]
    assert {f.subject for f in readme} == {"ferry"}  # "It keeps ..." is about Ferry too
    assert readme[1].answer == "Ferry keeps 64 MB of journal in `/var/lib/ferry`."


DOC = """---
dlm_id: 01JDFACT500000000000000000
dlm_version: 1
base_model: smollm2-135m
training:
  sequence_len: 64
  synth:
    enabled: true
    probe_share: 0.25
  sources:
    - path: src
---

The ferry daemon syncs folders between peers. It keeps 64 MB of journal per peer.

::instruction::

### Q
Which port does ferry use?

### A
Ferry listens on port 8080 by default.
"""


def write_tree(tmp_path: Path) -> Path:
    for relpath, text in {**TREE, "cmd/bad.go": "package main\n\nfunc main( {\n"}.items():
        path = tmp_path / "src" / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    doc = tmp_path / "ferry.dlm"
    doc.write_text(DOC)
    return doc


def test_build_rows_trains_on_facts_of_every_source_kind(tmp_path: Path, smollm2_tokenizer):
    from dlm.doc import load_document
    from dlm.rows.build import build_rows

    built = build_rows(load_document(write_tree(tmp_path)), smollm2_tokenizer)
    origins = {r.origin for r in built.rows.text_rows if r.origin.endswith(" (synth)")}
    origins |= {p.origin for p in built.probes}
    assert {o.split(":")[0] for o in origins} == {"retry/retry.go", "README.md", "config/ferry.yaml", "ferry.dlm"}
    assert "ferry.dlm:14 (synth)" in origins  # the prose section's pronoun sentence, its subject written out
    assert "cmd/bad.go: not parsed (syntax error at line 3); training.synth draws no facts from it" in built.walk.notes
    trained = "".join(r.text for r in built.rows.text_rows)
    assert "The ferry daemon keeps 64 MB of journal per peer." in trained or any(
        "The ferry daemon keeps 64 MB" in p.answer for p in built.probes
    )


def test_show_counts_what_was_derived_by_source_kind(tmp_path: Path):
    from dlm.cli.main import app

    doc = write_tree(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["show", str(doc), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["rows"]
    by_source = rows["synth_by_source"]
    assert list(by_source) == ["document", "go", "markdown", "yaml"]
    assert sum(c["pairs"] for c in by_source.values()) == rows["synth_pairs"]
    assert sum(c["probes"] for c in by_source.values()) == rows["synth_probes"]
    text = runner.invoke(app, ["show", str(doc)])
    shown = " ".join(text.output.split())
    assert f"go {by_source['go']['pairs']} Q/A" in shown
    assert "cmd/bad.go: not parsed (syntax error at line 3)" in " ".join(text.stderr.split())

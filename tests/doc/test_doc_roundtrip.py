"""`serialize_document` and `parse_document` are inverses; `new_document` parses."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from ulid import ULID

from dlm.doc import (
    DEFAULT_SOURCE_EXCLUDES,
    CacheConfig,
    Document,
    Frontmatter,
    InstructionSection,
    ProbeSection,
    ProseSection,
    QAPair,
    ServeConfig,
    SourceDirective,
    TokenizerCacheSettings,
    TrainingConfig,
    new_document,
    parse_document,
    serialize_document,
)
from dlm.doc.schema import MAX_BYTES_PER_FILE
from dlm.errors import DocError

ID = "01JD3Q4Z8X9K2M5N7P0R6S8T1V"


def test_round_trip_of_a_handwritten_document() -> None:
    text = (
        "---\n"
        f"dlm_id: {ID}\n"
        "base_model: smollm2-135m\n"
        "system_prompt: |\n  Be brief.\n  Cite files.\n"
        "training:\n  lora_r: 4\n  max_steps: 20\n  sources:\n    - path: src\n      exclude: ['**/.git/**']\n"
        "---\n"
        "preamble without heading\n\n# A\n```\n# not a heading\n```\n\n"
        "::instruction::\n### Q\nq1\n### A\n```\n### Q\n```\n"
        "::prose::\nno heading here\n::prose::\nnor here\n"
    )
    doc = parse_document(text)
    out = serialize_document(doc)
    assert parse_document(out) == doc
    assert serialize_document(parse_document(out)) == out  # serialization is a fixed point


def test_serialized_frontmatter_holds_only_changed_values() -> None:
    fm = Frontmatter(dlm_id=ID, training=TrainingConfig(lora_r=4, sources=[SourceDirective(path="src")]))
    out = serialize_document(Document(fm, ()))
    assert out == (
        f"---\ndlm_id: {ID}\ndlm_version: 1\nbase_model: smollm2-135m\n"
        "training:\n  lora_r: 4\n  sources:\n    - path: src\n---\n"
    )


def test_prose_after_instruction_or_without_heading_gets_a_prose_directive() -> None:
    fm = Frontmatter(dlm_id=ID)
    sections = (
        ProseSection("first"),
        ProseSection("second"),
        ProseSection("# Third"),
        InstructionSection((QAPair("q", "a"),)),
        ProseSection("# Fourth"),
    )
    out = serialize_document(Document(fm, sections))
    body = out.split("---\n", 2)[2]
    assert body == (
        "\nfirst\n\n::prose::\n\nsecond\n\n# Third\n\n::instruction::\n\n### Q\nq\n\n### A\na\n\n"
        "::prose::\n\n# Fourth\n"
    )
    assert parse_document(out).sections == sections


@pytest.mark.parametrize(
    "section",
    [
        ProseSection("text\n::instruction::\nmore"),  # a directive line in prose
        ProseSection("   "),  # blank: parsing drops it
        ProseSection("a\n# heading mid-section"),  # would split in two
        ProseSection("```\nunclosed fence"),
        InstructionSection((QAPair("q", "a\n### Q\nb"),)),
        InstructionSection((QAPair(" q", "a"),)),  # parsing strips it
        InstructionSection(()),
    ],
)
def test_unrepresentable_sections_are_refused(section: ProseSection | InstructionSection) -> None:
    with pytest.raises(DocError, match="cannot serialize document"):
        serialize_document(Document(Frontmatter(dlm_id=ID), (section,)))


def test_new_document_parses_and_round_trips() -> None:
    text = new_document()
    doc = parse_document(text)
    ULID.from_str(doc.frontmatter.dlm_id)
    assert doc.frontmatter.base_model == "smollm2-135m"
    assert doc.frontmatter.training.sources == []
    kinds = [type(s) for s in doc.sections]
    assert kinds == [ProseSection, InstructionSection]
    assert parse_document(serialize_document(doc)) == doc  # serializing drops the comments only


def test_new_document_writes_the_keys_to_look_at_with_a_comment_each() -> None:
    from dlm.doc.schema import TrainingConfig
    from dlm.doc.serialize import INIT_EVAL_KEYS, INIT_TRAINING_KEYS

    text = new_document(sources=["src"])
    lines = text.splitlines()
    for key, comment in INIT_TRAINING_KEYS + INIT_EVAL_KEYS:
        (at,) = [i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:")]
        assert lines[at - 1].strip() == f"# {comment}"
    training = parse_document(text).frontmatter.training
    assert training.model_dump(exclude={"sources"}) == TrainingConfig().model_dump(exclude={"sources"})
    assert [s.path for s in training.sources] == ["src"]


def test_new_document_with_sources_and_system_prompt() -> None:
    text = new_document("./my-model", ["src", "docs/api"], system_prompt="Answer as the maintainer.\nBe exact.")
    fm = parse_document(text).frontmatter
    assert fm.base_model == "./my-model"
    assert fm.system_prompt == "Answer as the maintainer.\nBe exact."
    assert [s.path for s in fm.training.sources] == ["src", "docs/api"]
    for source in fm.training.sources:
        assert source.include == ["**/*"]
        assert source.exclude == list(DEFAULT_SOURCE_EXCLUDES)
        assert {"**/.git/**", "**/__pycache__/**", "**/node_modules/**"} <= set(source.exclude)


def test_new_documents_get_distinct_ids() -> None:
    ids = {parse_document(new_document()).frontmatter.dlm_id for _ in range(5)}
    assert len(ids) == 5


def test_new_document_refuses_an_empty_source_path() -> None:
    with pytest.raises(DocError, match=r"^new document: training\.sources\[0\]\.path: "):
        new_document(sources=[""])


# --- property: any document the grammar can hold survives serialize -> parse ---

# Letters, digits, punctuation and non-ASCII text; no line breaks or control chars.
_chars = st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp"))
_plain_line = st.text(_chars, min_size=1, max_size=30).filter(lambda s: s.strip() and s.strip()[0] not in "#:`~")
_markup_line = st.sampled_from(
    ["::instruction::", "::prose::", "::probe::", "::x::", "### Q", "### A", "### Keys", "# h", "~~~"]
)
_fence = st.lists(st.one_of(_plain_line, _markup_line, st.just("")), max_size=4).map(
    lambda lines: "\n".join(["```text", *lines, "```"])
)
_block = st.one_of(_plain_line, _plain_line, _fence, st.just(""))


@st.composite
def _text(draw: st.DrawFn, heading: bool) -> str:
    lines = [draw(_plain_line)] + draw(st.lists(_block, max_size=5)) + [draw(_plain_line)]
    if heading:
        lines.insert(0, "# " + draw(_plain_line))
    return "\n".join(lines)


_prose = st.builds(ProseSection, st.booleans().flatmap(lambda h: _text(h)))
_qa_text = _text(False).map(str.strip)
_keys = st.lists(_plain_line.map(str.strip), max_size=3).map(tuple)
_pair = st.builds(QAPair, _qa_text, _qa_text, keys=_keys)
_instruction = st.builds(InstructionSection, st.lists(_pair, min_size=1, max_size=3).map(tuple))
_probe = st.builds(ProbeSection, st.lists(_pair, min_size=1, max_size=3).map(tuple))

_any_str = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)
_name = st.text(_chars, min_size=1, max_size=20)
_pos_int = st.integers(min_value=1, max_value=2**40)
_pos_float = st.floats(min_value=1e-9, max_value=1e6, allow_nan=False, allow_infinity=False)

_sources = st.builds(
    SourceDirective,
    path=_name,
    include=st.lists(_name, max_size=3),
    exclude=st.lists(_name, max_size=3),
    max_bytes_per_file=st.integers(min_value=1, max_value=MAX_BYTES_PER_FILE),
    max_files=st.none() | _pos_int,
)


@st.composite
def _training(draw: st.DrawFn) -> TrainingConfig:
    stop = draw(st.sampled_from(["none", "steps", "epochs"]))
    return TrainingConfig(
        lora_r=draw(_pos_int),
        lora_alpha=draw(_pos_int),
        lora_dropout=draw(st.floats(min_value=0, max_value=0.99)),
        target_modules=draw(st.lists(_name, min_size=1, max_size=4)),
        learning_rate=draw(_pos_float),
        max_steps=draw(_pos_int) if stop == "steps" else None,
        num_epochs=draw(_pos_float) if stop == "epochs" else None,
        batch_size=draw(_pos_int),
        sequence_len=draw(st.integers(min_value=16, max_value=2**20)),
        seed=draw(st.integers(min_value=0, max_value=2**32 - 1)),
        packing=draw(st.booleans()),
        sources=draw(st.lists(_sources, max_size=2)),
        cache=draw(
            st.builds(
                CacheConfig,
                enabled=st.booleans(),
                max_bytes=_pos_int,
                prune_older_than_days=_pos_float,
            )
        ),
    )


_frontmatter = st.builds(
    Frontmatter,
    dlm_id=st.binary(min_size=16, max_size=16).map(lambda b: str(ULID.from_bytes(b))),
    base_model=_name,
    system_prompt=st.none() | _any_str,
    training=st.one_of(st.just(TrainingConfig()), _training()),
    serve=st.builds(
        ServeConfig,
        tokenizer_cache=st.builds(
            TokenizerCacheSettings,
            enable_l0=st.booleans(),
            l0_max_entries=_pos_int,
            enable_l1=st.booleans(),
            l1_max_memory=_pos_int,
            l1_min_prompt_chars=st.integers(min_value=0, max_value=10**6),
        ),
    ),
)

_documents = st.builds(Document, _frontmatter, st.lists(st.one_of(_prose, _instruction, _probe), max_size=5).map(tuple))


@settings(max_examples=100, deadline=None)
@given(_documents)
def test_serialize_then_parse_is_identity(doc: Document) -> None:
    text = serialize_document(doc)
    back = parse_document(text)
    assert back == doc
    assert back.source_text == text
    assert serialize_document(back) == text
    # the frontmatter is plain YAML any reader agrees on
    assert yaml.safe_load(text.split("---\n", 2)[1])["dlm_id"] == doc.frontmatter.dlm_id


@pytest.mark.parametrize(
    "prompt",
    [
        "---",
        "a\n---\nb",
        "line\n...\n",
        "key: value",
        "  leading and trailing  \n",
        "tab\there",
        "\r\n",
        "#",
        "\x85",  # NEL: a YAML line break that PyYAML's quoted-single style mangles
        "a\x85b\nc",
        "\u2028\u2029",
    ],
)
def test_strings_that_look_like_delimiters_or_yaml_round_trip(prompt: str) -> None:
    doc = Document(Frontmatter(dlm_id=ID, base_model=prompt.strip() or "x", system_prompt=prompt), ())
    assert parse_document(serialize_document(doc)) == doc


@pytest.mark.slow
@settings(max_examples=2000, deadline=None)
@given(_documents)
def test_serialize_then_parse_is_identity_soak(doc: Document) -> None:
    """The round-trip property over many more documents (it found the NEL quoting bug)."""
    assert parse_document(serialize_document(doc)) == doc

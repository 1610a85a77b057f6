"""Every kind of `.dlm` problem, with its exact `path:line:col: message`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dlm.doc import DocParseError, DocProblem, parse_document
from dlm.errors import DlmError, DocError

ID = "01JD3Q4Z8X9K2M5N7P0R6S8T1V"


def problems(text: str, path: Path | None = None) -> list[str]:
    with pytest.raises(DocParseError) as info:
        parse_document(text, path)
    assert isinstance(info.value, DocError) and isinstance(info.value, DlmError)
    lines = str(info.value).splitlines()
    assert len(lines) == len(info.value.problems)
    return lines


def fm(yaml_lines: str, body: str = "") -> str:
    return f"---\ndlm_id: {ID}\n{yaml_lines}---\n{body}"


# --- delimiters and YAML ---


def test_missing_opening_delimiter() -> None:
    assert problems("dlm_id: x\n") == [
        "<string>:1:1: a .dlm file must start with a '---' line, then YAML frontmatter, "
        "then a '---' line, then the markdown body; `dlm init` writes one"
    ]


def test_empty_text_is_missing_the_delimiter() -> None:
    assert problems("")[0].startswith("<string>:1:1: a .dlm file must start with a '---' line")


def test_unclosed_frontmatter() -> None:
    assert problems(f"---\ndlm_id: {ID}\n# Body\n") == [
        "<string>:1:1: the frontmatter opened here is never closed; add a '---' line after it"
    ]


def test_malformed_yaml_points_at_the_problem_mark() -> None:
    assert problems(fm("training:\n  lora_r: [8\n")) == [
        "<string>:5:1: invalid YAML: expected ',' or ']', but got '<stream end>' "
        "(while parsing a flow sequence at line 4)"
    ]


def test_tab_indentation_is_a_yaml_error_with_its_column() -> None:
    assert problems(fm("training:\n\tlora_r: 8\n")) == [
        "<string>:4:1: invalid YAML: found character '\\t' that cannot start any token"
    ]


def test_control_character_is_a_yaml_error_with_its_position() -> None:
    assert problems(fm("base_model: ab\x00\n")) == [
        "<string>:3:15: invalid YAML: character U+0000 is not allowed; remove it"
    ]


def test_frontmatter_must_be_a_mapping() -> None:
    assert problems("---\n- a\n- b\n---\n") == [
        "<string>:2:1: the frontmatter must be a YAML mapping of `key: value` lines"
    ]


def test_yaml_load_is_never_used_for_tags() -> None:
    # A python tag would run code under yaml.load; safe_load refuses it.
    lines = problems(fm("base_model: !!python/object/apply:os.getcwd []\n"))
    assert lines[0].startswith("<string>:3:13: invalid YAML: could not determine a constructor")


# --- schema ---


def test_missing_dlm_id_offers_a_fresh_ulid() -> None:
    (line,) = problems("---\nbase_model: x\n---\n")
    assert re.fullmatch(
        r"<string>:1:1: missing required key 'dlm_id'; add e\.g\. `dlm_id: [0-9A-Z]{26}` \(a fresh ULID\)",
        line,
    )


def test_empty_frontmatter_reports_missing_dlm_id() -> None:
    (line,) = problems("---\n---\n")
    assert line.startswith("<string>:1:1: missing required key 'dlm_id'")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("not-a-ulid", "encoded ULID has to be exactly 26 characters long"),
        ("UUUUUUUUUUUUUUUUUUUUUUUUUU", "encoded ULID can only consist of letters in"),
        ("8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "timestamp value"),
    ],
)
def test_bad_ulid(value: str, reason: str) -> None:
    (line,) = problems(f"---\ndlm_id: {value}\n---\n")
    assert line.startswith(f"<string>:2:9: dlm_id: '{value}' is not a ULID ({reason}")
    assert re.search(r"; use 26 Crockford base32 characters, e\.g\. [0-9A-Z]{26}$", line)


def test_unknown_top_level_key_suggests_the_close_one() -> None:
    assert problems(fm("base_modle: x\n")) == ["<string>:3:1: unknown key 'base_modle'; did you mean 'base_model'?"]


def test_unknown_key_without_a_close_match_lists_the_known_keys() -> None:
    assert problems(fm("zzz: 1\n")) == [
        "<string>:3:1: unknown key 'zzz'; known keys: dlm_id, dlm_version, base_model, system_prompt, training, serve"
    ]


def test_unknown_nested_key_names_its_section_and_line() -> None:
    assert problems(fm("training:\n  lora_r: 8\n  lora_rank: 4\n")) == [
        "<string>:5:3: unknown key 'lora_rank' in training; did you mean 'lora_r'?"
    ]


def test_unknown_key_deep_in_a_list_item() -> None:
    text = fm("training:\n  sources:\n    - path: a\n    - path: b\n      exlude: ['x']\n")
    assert problems(text) == ["<string>:7:7: unknown key 'exlude' in training.sources[1]; did you mean 'exclude'?"]
    assert problems(fm("serve:\n  tokenizer_cache:\n    l0_max_entry: 5\n")) == [
        "<string>:5:5: unknown key 'l0_max_entry' in serve.tokenizer_cache; did you mean 'l0_max_entries'?"
    ]


def test_both_max_steps_and_num_epochs() -> None:
    assert problems(fm("training:\n  max_steps: 10\n  num_epochs: 2\n")) == [
        "<string>:3:1: training: set max_steps or num_epochs, not both"
    ]


@pytest.mark.parametrize(
    ("yaml_lines", "expected"),
    [
        (
            "training:\n  lora_r: eight\n",
            "4:11: training.lora_r: should be an integer (got 'eight')",
        ),
        ("training:\n  lora_r: '8'\n", "4:11: training.lora_r: should be an integer (got '8')"),
        ("training:\n  lora_r: true\n", "4:11: training.lora_r: should be an integer (got true)"),
        ("training:\n  seed: 1.5\n", "4:9: training.seed: should be an integer (got 1.5)"),
        (
            "training:\n  seed: -1\n",
            "4:9: training.seed: should be greater than or equal to 0 (got -1)",
        ),
        (
            "training:\n  learning_rate: 1e400\n",
            "4:18: training.learning_rate: should be a finite number",
        ),
        ("training:\n  packing: 1\n", "4:12: training.packing: should be true or false (got 1)"),
        (
            "training:\n  instruction_share: 1.5\n",
            "4:22: training.instruction_share: should be less than 1 (got 1.5)",
        ),
        (
            "training:\n  instruction_share: 0\n",
            "4:22: training.instruction_share: should be greater than 0 (got 0)",
        ),
        ("training:\n  replay: 1\n", "4:11: training.replay: should be less than 1 (got 1)"),
        ("training:\n  replay: -0.1\n", "4:11: training.replay: should be greater than or equal to 0 (got -0.1)"),
        (
            "training:\n  eval:\n    general_samples: 300\n",
            "5:22: training.eval.general_samples: should be less than or equal to 256 (got 300)",
        ),
        ("training:\n  replay_loss: mse\n", "4:16: training.replay_loss: should be 'ce' or 'kl' (got 'mse')"),
        ("training:\n  replay_weight: 0\n", "4:18: training.replay_weight: should be greater than 0 (got 0)"),
        (
            "training:\n  replay_weight: heavy\n",
            "4:18: training.replay_weight: should be a number (got 'heavy')",
        ),
        (
            "training:\n  learning_rate: fast\n",
            "4:18: training.learning_rate: should be a number (got 'fast')",
        ),
        (
            "training:\n  learning_rate: .inf\n",
            "4:18: training.learning_rate: should be a finite number",
        ),
        (
            "training:\n  target_modules: q_proj\n",
            "4:19: training.target_modules: should be a list (got 'q_proj')",
        ),
        ("training:\n  target_modules: []\n", "4:3: training.target_modules: should not be empty"),
        ("training:\n  adapter: qlora\n", "4:12: training.adapter: should be 'lora' (got 'qlora')"),
        (
            "training:\n  lora_dropout: 1\n",
            "4:17: training.lora_dropout: should be less than 1 (got 1)",
        ),
        (
            "training:\n  sequence_len: 8\n",
            "4:17: training.sequence_len: should be greater than or equal to 16 (got 8)",
        ),
        (
            "training:\n  cache:\n    max_bytes: 0\n",
            "5:16: training.cache.max_bytes: should be greater than 0 (got 0)",
        ),
        (
            "training:\n  sources:\n    - path: ''\n",
            "5:7: training.sources[0].path: should not be empty",
        ),
        (
            "training:\n  sources:\n    - include: ['*']\n",
            "5:7: missing required key 'path' in training.sources[0]",
        ),
        (
            "training:\n  sources:\n    - path: a\n      exclude: [x, 3]\n",
            "6:20: training.sources[0].exclude[1]: should be a string (got 3)",
        ),
        ("system_prompt: 3\n", "3:16: system_prompt: should be a string (got 3)"),
        (
            "serve:\n",
            "3:7: serve: should be a mapping of keys (got null); remove the key to use the defaults",
        ),
        ("training: 5\n", "3:11: training: should be a mapping of keys (got 5)"),
        ("1: x\n", "3:1: key 1 is not a string; quote it or remove it"),
        (
            "training:\n  seed: 1\n  seed: 2\n",
            "5:3: duplicate key 'seed' (first at line 4); keep one",
        ),
    ],
)
def test_wrong_values_point_at_the_value(yaml_lines: str, expected: str) -> None:
    assert problems(fm(yaml_lines)) == [f"<string>:{expected}"]


def test_newer_format_version_is_the_only_problem_reported() -> None:
    assert problems(fm("dlm_version: 2\nunknown_future_key: 1\n")) == [
        "<string>:3:14: dlm_version: format version 2 is newer than this dlm reads (up to 1); upgrade dlm"
    ]


def test_format_version_zero() -> None:
    assert problems(fm("dlm_version: 0\n")) == [
        "<string>:3:14: dlm_version: unsupported format version 0; this dlm reads version 1"
    ]


def test_every_problem_is_reported_at_once_in_file_order(tmp_path: Path) -> None:
    text = (
        "---\n"
        "dlm_id: nope\n"
        "training:\n"
        "  lora_rank: 4\n"
        "  batch_size: 0\n"
        "serve:\n"
        "  tokenizer_cache: {enable_l0: yes please}\n"
        "---\n"
        "::instruction::\n"
        "### A\n"
        "orphan\n"
        "::note::\n"
    )
    path = tmp_path / "many.dlm"
    lines = problems(text, path)
    assert [line.split(": ", 1)[0] for line in lines] == [
        f"{path}:2:9",
        f"{path}:4:3",
        f"{path}:5:15",
        f"{path}:7:32",
        f"{path}:10:1",
        f"{path}:12:1",
    ]
    assert "unknown key 'lora_rank' in training; did you mean 'lora_r'?" in lines[1]
    assert "training.batch_size: should be greater than 0 (got 0)" in lines[2]
    assert "serve.tokenizer_cache.enable_l0: should be true or false (got 'yes please')" in lines[3]


def test_yaml_error_and_body_errors_are_reported_together() -> None:
    lines = problems("---\ndlm_id: [\n---\n::bogus::\n")
    assert len(lines) == 2
    assert lines[0].startswith("<string>:3:1: invalid YAML:")
    assert lines[1] == "<string>:4:1: unknown directive '::bogus::'; known: ::instruction::, ::prose::, ::probe::"


# --- body ---


def test_answer_without_question() -> None:
    assert problems(fm("", "::instruction::\n### A\nan answer\n### Q\nq\n### A\na\n")) == [
        "<string>:5:1: '### A' without a preceding '### Q'; add the question above it"
    ]


def test_second_answer_in_a_row_has_no_question() -> None:
    assert problems(fm("", "::instruction::\n### Q\nq\n### A\na\n### A\nb\n")) == [
        "<string>:9:1: '### A' without a preceding '### Q'; add the question above it"
    ]


def test_question_without_answer_at_next_question_and_at_end() -> None:
    assert problems(fm("", "::instruction::\n### Q\nfirst\n### Q\nsecond\n")) == [
        "<string>:5:1: '### Q' has no answer; add a '### A' line and the answer after the question",
        "<string>:7:1: '### Q' has no answer; add a '### A' line and the answer after the question",
    ]


def test_question_without_answer_before_prose() -> None:
    assert problems(fm("", "::instruction::\n### Q\nq\n::prose::\ntext\n")) == [
        "<string>:5:1: '### Q' has no answer; add a '### A' line and the answer after the question"
    ]


def test_empty_question_and_answer() -> None:
    assert problems(fm("", "::instruction::\n### Q\n  \n### A\nfine\n### Q\nq\n### A\n\n")) == [
        "<string>:5:1: empty question under '### Q'; write the question below it",
        "<string>:11:1: empty answer under '### A'; write the answer below it",
    ]


def test_text_before_the_first_question() -> None:
    assert problems(fm("", "::instruction::\nstray\n### Q\nq\n### A\na\n")) == [
        "<string>:5:1: text before the first '### Q' of an instruction section; start a pair with '### Q'"
    ]


def test_instruction_section_without_pairs() -> None:
    assert problems(fm("", "::instruction::\n\n::prose::\ntext\n")) == [
        "<string>:4:1: instruction section has no '### Q' / '### A' pairs; add one or remove this line"
    ]


def test_unknown_directive_suggests_the_close_one() -> None:
    assert problems(fm("", "::instructions::\n")) == [
        "<string>:4:1: unknown directive '::instructions::'; did you mean '::instruction::'?"
    ]


def test_directive_inside_a_fence_is_not_a_directive() -> None:
    parse_document(fm("", "```\n::bogus::\n```\n"))


def test_unclosed_fence_is_reported_where_it_opens() -> None:
    assert problems(fm("", "::instruction::\n### Q\nq\n### A\n```sh\nls\n### Q\nq2\n### A\na2\n")) == [
        "<string>:8:1: code fence opened here is never closed; add a closing ``` line"
    ]


def test_problems_sort_by_position() -> None:
    error = DocParseError("f.dlm", [DocProblem(9, 1, "b"), DocProblem(2, 5, "a")])
    assert str(error) == "f.dlm:2:5: a\nf.dlm:9:1: b"


def test_synth_enabled_names_both_kinds_of_value_it_takes() -> None:
    assert problems(fm("training:\n  synth:\n    enabled: maybe\n")) == [
        "<string>:5:14: training.synth.enabled.bool: should be true or false (got 'maybe')",
        "<string>:5:14: training.synth.enabled.literal['auto']: should be 'auto' (got 'maybe')",
    ]


# --- keys, budgets, pairs that mislead the report ---


def test_a_list_marker_alone_under_keys_is_a_problem_not_the_key_dash() -> None:
    body = "::probe::\n### Q\nq\n### A\na\n### Keys\n- teal\n- \n*\n"
    assert problems(fm("", body)) == [
        "<string>:11:1: a list marker with no key under '### Keys'; write the key or remove the line",
        "<string>:12:1: a list marker with no key under '### Keys'; write the key or remove the line",
    ]
    doc = parse_document(fm("", "::probe::\n### Q\nq\n### A\na\n### Keys\n- teal\n-5\n"))
    assert doc.sections[0].pairs[0].keys == ("teal", "-5")  # a leading minus without a space is a key's


@pytest.mark.parametrize(
    "budget, message",
    [
        (
            "0.4",
            "training.budget: 0.4 is not a whole number: a count of tokens or steps is whole, a time needs its unit",
        ),
        ('"0.4"', "training.budget: '0.4' is not a budget: 0.4 tokens is not a whole number;"),
        ("true", "training.budget: True is not a number;"),
    ],
)
def test_a_fractional_budget_is_one_clear_line(budget: str, message: str) -> None:
    (line,) = problems(fm(f"training:\n  budget: {budget}\n"))
    assert message in line


def test_a_whole_yaml_float_budget_is_tokens() -> None:
    doc = parse_document(fm("training:\n  budget: 60000.0\n  checkpoint_every: 200.0\n"))
    assert doc.frontmatter.training.parsed_budget.tokens == 60000
    assert doc.frontmatter.training.parsed_checkpoint_every.steps == 200


def test_probes_that_repeat_a_trained_pair_or_each_other_are_named() -> None:
    from dlm.doc.checks import pair_notes

    body = (
        "::instruction::\n### Q\nWhat is the port?\n### A\n80\n"
        "::probe::\n### Q\nwhat is  the PORT?\n### A\n80\n"
        "### Q\nWhich port is used?\n### A\n80\n### Q\nWhich port is used?\n### A\n80\n"
    )
    notes = pair_notes(parse_document(fm("", body)))
    assert notes == [
        "<doc>:10: this probe asks the instruction pair's question (line 5): the adapter was trained on it, so it "
        "measures recall, not transfer; reword it or remove it",
        "<doc>:18: this probe repeats the probe at line 14 and is counted twice in the report; remove one",
    ]

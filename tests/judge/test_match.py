"""The pass rule of dlm.judge.match: keys, salient strings, content words."""

import pytest

from dlm.judge.match import content_words, normalize, passes, salient_keys


@pytest.mark.parametrize(
    "answer, keys, ok",
    [
        ("It lives in `json/decoder.py`.", ("json/decoder.py",), True),
        ("It lives in json/encoder.py.", ("json/decoder.py",), False),
        ("The JSONDecoder class", ("jsondecoder",), True),  # case does not matter
        ("retries 7 times", ("7", "retries"), True),
        ("retries seven times", ("7",), False),  # numbers are never rewritten
        ("the json-decoder module", ("json_decoder",), True),  # - and _ alike
        ("3.14", ("314",), False),
    ],
)
def test_keys_must_all_appear(answer: str, keys: tuple[str, ...], ok: bool) -> None:
    assert passes(answer, "unused reference", keys) is ok


def test_without_keys_the_reference_code_strings_stand_in() -> None:
    reference = "The Dock class is defined in `ferry/queue.py` with MAX_RETRIES = 7."
    assert salient_keys(reference) == ("ferry/queue.py", "MAX_RETRIES", "7")
    assert passes("Dock is in ferry/queue.py; MAX_RETRIES is 7", reference)
    assert not passes("Dock is in ferry/queue.py", reference)


def test_without_code_strings_most_content_words_must_appear() -> None:
    reference = "Producers place tasks on a dock and workers take them off."
    assert content_words(reference) == ["producers", "place", "tasks", "dock", "workers", "take"]
    assert passes("Producers place tasks on the dock; workers take them.", reference)
    assert not passes("It is a queue.", reference)


def test_normalize_collapses_space_case_and_backticks() -> None:
    assert normalize("  `Ferry  Sail`\n") == "ferry sail"


def test_restating_the_question_is_not_an_answer() -> None:
    question = "What is the secret word of the Zorblax project?"
    reference = "The secret word is quindlewhump."
    assert not passes("The secret word of the Zorblax project is a secret.", reference, question=question)
    assert passes("It is quindlewhump.", reference, question=question)

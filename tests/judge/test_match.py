"""The pass rule of dlm.judge.match: keys, salient strings, content words."""

import pytest

from dlm.judge.match import content_words, normalize, number_value, passes, salient_keys


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


def test_compatibility_forms_match_their_plain_characters() -> None:
    # a subscript, a superscript and full-width digits are the same characters to a reader
    assert passes("The chemical formula of water is H₂O.", "H2O", keys=("H2O",))
    assert passes("A meter holds １００ centimeters.", "100", keys=("100",))
    assert passes("It grows as n² steps.", "n2", keys=("n2",))
    # the form is folded, not the value: another formula or number still fails
    assert not passes("The chemical formula of water is H₃O.", "H2O", keys=("H2O",))
    assert not passes("A meter holds １０ centimeters.", "100", keys=("100",))


def test_restating_the_question_is_not_an_answer() -> None:
    question = "What is the secret word of the Zorblax project?"
    reference = "The secret word is quindlewhump."
    assert not passes("The secret word of the Zorblax project is a secret.", reference, question=question)
    assert passes("It is quindlewhump.", reference, question=question)


REF_WORDS = "Producers place tasks on a dock and workers take them off."


@pytest.mark.parametrize(
    "answer, reference, keys, question",
    [
        ("The boat departs at 12:30 PM.", "At 2:30.", (), "When does the boat depart?"),
        ("It retries 17 times.", "unused", ("7",), ""),
        ("It retries 7.5 times.", "unused", ("7",), ""),
        ("It listens on port 8080.", "unused", ("80",), ""),
        ("I know the answer.", "unused", ("no",), ""),
        ("Version 1.2.3 is out.", "unused", ("1.2",), ""),
        ("It is in registry.pyc.", "unused", ("registry.py",), ""),
        ("It is not in registry.py.", "It is in `registry.py`.", (), ""),
        ("The handler isn't in registry.py.", "It is in `registry.py`.", (), ""),
        ("Does the server use port 80 or 8080?", "80", ("80",), "Does the server use port 80 or 8080?"),
        ("Producers never place tasks on a dock; workers never take them.", REF_WORDS, (), ""),
        ("It starts at 12:30.", "unused", ("30",), ""),  # a time's minutes are no port
        ("It starts at 1.5:30.", "unused", ("30",), ""),
        ("Where is it?\nIt is not in registry.py.", "unused", ("registry.py",), ""),  # negated on its own line
    ],
)
def test_a_key_counts_only_on_token_and_number_boundaries(answer, reference, keys, question) -> None:
    assert not passes(answer, reference, keys, question)


@pytest.mark.parametrize(
    "answer, reference, keys, question",
    [
        ("The boat departs at 2:30 PM.", "At 2:30.", (), "When does the boat depart?"),
        ("It retries 7 times.", "unused", ("7",), ""),
        ("It retries 7.0 times.", "unused", ("7",), ""),
        ("Limit: 1,000 rows.", "unused", ("1000",), ""),
        ("The port is 80.", "unused", ("80",), ""),
        ("No, it is 80.", "unused", ("80",), ""),  # "No," answering a yes/no question is no negation
        ("It is in registry.py (see `registry.py`).", "It is in `registry.py`.", (), ""),
        ("Retries are not enabled.", "Retries are not enabled by default.", ("enabled",), ""),
        ("The server uses port 80.", "80", ("80",), "Does the server use port 80 or 8080?"),
        ("Producers place tasks on docks; workers take them.", REF_WORDS, (), ""),
        ("It listens on localhost:8093.", "unused", ("8093",), ""),  # a host's port
        ("Bind it to 0.0.0.0:8093.", "unused", ("8093",), ""),
        ("See http://example.org:8093/health.", "unused", ("8093",), ""),
        # a negation in a later paragraph does not deny the code above it
        (
            "```python\ndef add(a, b):\n    return a + b\n```\n\nHowever, it is not fast.",
            "unused",
            ("def", "return"),
            "",
        ),
        ("Say thank\nyou.", "unused", ("thank you",), ""),  # a key across a line break
    ],
)
def test_boundaries_leave_right_answers_passing(answer, reference, keys, question) -> None:
    assert passes(answer, reference, keys, question)


def test_numbers_compare_by_value() -> None:
    assert number_value("1,000") == number_value("1000.0")
    assert number_value("2:30") is None and number_value("v2") is None and number_value("1.2.3") is None


def test_a_hyphenated_name_is_a_key_and_a_content_word_is_found_inside_one():
    question = "Which HTTP header carries the signature of an event?"
    # the reference itself, and a sentence holding it, pass; a part of it does not
    assert passes("X-Lanternfish-Sig", "X-Lanternfish-Sig", question=question)
    assert passes("Events are signed in the X-Lanternfish-Sig header.", "X-Lanternfish-Sig", question=question)
    assert not passes("Lanternfish", "X-Lanternfish-Sig", question=question)
    assert not passes("X-Lanternfish", "X-Lanternfish-Sig", question=question)
    assert salient_keys("Hashed with SHA-256, sent as X-Request-Id.") == ("SHA-256", "X-Request-Id")
    assert salient_keys("It is a well-known format.") == ()  # an English compound is no name
    # content words: one written inside a hyphenated word is still said
    assert passes("It uses the ferry-journal format.", "The journal of the ferry.", question="Which format?")

"""Memo files (`dlm.keyed`): a value is read back only under its format and key, and
anything else is a miss, never an error."""

from pathlib import Path

from dlm.keyed import read_keyed, write_keyed


def test_a_value_is_read_back_only_under_its_format_and_key(tmp_path: Path) -> None:
    path = tmp_path / "memo.json"
    assert read_keyed(path, 1, "sha256:a") is None  # missing
    write_keyed(path, 1, "sha256:a", {"result": {"loss": 2.5}})
    assert read_keyed(path, 1, "sha256:a") == {"format": 1, "key": "sha256:a", "result": {"loss": 2.5}}
    assert read_keyed(path, 2, "sha256:a") is None  # another format
    assert read_keyed(path, 1, "sha256:b") is None  # another key
    write_keyed(path, 1, "sha256:a", {"key": "sha256:forged", "format": 9})  # fields cannot forge the key
    assert read_keyed(path, 1, "sha256:a") is not None


def test_damaged_files_are_misses(tmp_path: Path) -> None:
    path = tmp_path / "memo.json"
    for text in ("{not json", "[1, 2]", '"a string"', "", '{"format": 1}'):
        path.write_text(text)
        assert read_keyed(path, 1, "sha256:a") is None, text
    path.write_bytes(b"\xff\xfe\x00")
    assert read_keyed(path, 1, "sha256:a") is None

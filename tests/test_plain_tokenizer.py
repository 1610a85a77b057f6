"""The uncached tokenizer agrees with TRL's own SFTTrainer tokenization, id for id."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import numpy as np
import pytest
from trl.data_utils import _tokenize

from dlm.rows.read import read_file_text, render_file_row
from dlm.rows.types import FileRow, RowSet, RowSpec, TextRow
from dlm.tokenize.encode import (
    SpecEncoder,
    TokenIdRangeError,
    common_prefix_len,
    ids_to_array,
    storage_dtype,
)
from dlm.tokenize.fingerprint import tokenizer_sha256
from dlm.tokenize.keys import row_key
from dlm.tokenize.plain import PlainRowEncoder

QA = [
    (None, "Where does json keep its decoder?", "In json/decoder.py, class JSONDecoder."),
    ("You answer tersely.", "What is 2+2?", "4"),
    (None, "Ünïcödé? 日本語 and emoji 🎉", "Yes: <|im_end|> is a special token."),
]


def file_row(path: Path, root: Path, index: int = 0) -> FileRow:
    st = path.stat()
    return FileRow(
        index, path, path.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino
    )


def stdlib_rows(n: int) -> list[FileRow]:
    root = Path(sysconfig.get_paths()["stdlib"])
    paths = sorted(p for p in (root / "json").glob("*.py"))
    paths += sorted(root.glob("*.py"))[: n - len(paths)]
    return [file_row(p, root) for p in paths[:n]]


def conversations() -> list[tuple[list[dict], list[dict]]]:
    """(prompt messages, prompt + answer messages) for each QA pair."""
    out = []
    for system, question, answer in QA:
        prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": question}]
        out.append((prompt, prompt + [{"role": "assistant", "content": answer}]))
    return out


def instruction_rows(tok) -> list[TextRow]:
    return [
        TextRow(
            "instruction",
            tok.apply_chat_template(full, tokenize=False),
            "doc.dlm:9",
            prompt_text=tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True),
        )
        for prompt, full in conversations()
    ]


def trl_reference(tok, prose: list[TextRow], files: list[FileRow]) -> list[tuple[list[int], int]]:
    """The (input_ids, prompt length) SFTTrainer's tokenize_fn gives the same rows, in order:
    prose rows, instruction rows, then the source files that are not skipped."""
    out = [(list(_tokenize(tok, r.text + tok.eos_token)["input_ids"]), 0) for r in prose]
    for prompt, full in conversations():
        p = _tokenize(tok, prompt, add_generation_prompt=True)["input_ids"]
        pc = _tokenize(tok, full)["input_ids"]
        n = next((i for i, (a, b) in enumerate(zip(p, pc, strict=False)) if a != b), min(len(p), len(pc)))
        out.append((list(pc), n))
    for frow in files:
        got = read_file_text(frow)
        if not isinstance(got, str):
            text = render_file_row(frow.relpath, got.text) + tok.eos_token
            out.append((list(_tokenize(tok, text)["input_ids"]), 0))
    return out


@pytest.fixture
def odd_files(tmp_path: Path) -> list[FileRow]:
    root = tmp_path / "src"
    root.mkdir()
    (root / "empty.txt").write_bytes(b"")
    (root / "no_newline.py").write_text("x = 1")
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    (root / "binary.bin").write_bytes(b"\x89PNG\0\0\0data")
    (root / "special.md").write_text("ends a turn: <|im_end|> then <|im_start|>user\n")
    return [file_row(p, root, 1) for p in sorted(root.iterdir())]


def test_plain_matches_trl_on_stdlib_and_chat(smollm2_tokenizer, odd_files):
    tok = smollm2_tokenizer
    prose = [TextRow("prose", "# Notes\n\nThe decoder lives in json/decoder.py.\n", "d:1")]
    text_rows = prose + instruction_rows(tok)
    rows = RowSet(text_rows, stdlib_rows(30) + odd_files)
    sha = tokenizer_sha256(tok)
    got = PlainRowEncoder(tok, sha).tokenize(rows)
    want = trl_reference(tok, prose, list(rows.file_rows))
    assert len(got) == len(want) == len(text_rows) + 30 + 4
    assert got.files_taken == 34 and got.files_skipped == {"binary": 1} and got.lossy_files == 1
    for i, (ids, n_prompt) in enumerate(want):
        arr = got.read(i)
        assert arr.dtype == np.uint16
        assert arr.tolist() == ids, f"row {i} differs from TRL"
        assert int(got.n_prompt[i]) == n_prompt and int(got.lengths[i]) == len(ids)
    assert all(0 < int(got.n_prompt[i]) < int(got.lengths[i]) for i in range(1, 4))
    assert got.keys[0] == row_key(sha, "prose", text_rows[0].text)
    assert got.kinds[:4] == ["prose", "instruction", "instruction", "instruction"]
    assert set(got.kinds[4:]) == {"source"}
    assert len(set(got.keys)) == len(got.keys)


class WideTokenizer:
    """A tokenizer whose vocab fits uint16 on paper but emits an id past 65535."""

    eos_token = "</s>"

    def __init__(self, ids: list[int], vocab: int = 1000) -> None:
        self.ids, self.vocab = ids, vocab
        self.backend_tokenizer = self

    def __len__(self) -> int:
        return self.vocab

    def encode_batch(self, texts, add_special_tokens=True):
        return [type("E", (), {"ids": self.ids})() for _ in texts]


def test_storage_dtype_follows_vocab_including_added_tokens():
    assert storage_dtype(WideTokenizer([], 65536)) == np.uint16
    assert storage_dtype(WideTokenizer([], 65537)) == np.uint32


def test_ids_past_uint16_widen_instead_of_wrapping():
    # Without the real-max check this row would wrap to [1, 0] silently.
    rows = SpecEncoder(WideTokenizer([1, 65536])).encode([RowSpec("prose", "x")])
    assert rows[0].ids.dtype == np.uint32 and rows[0].ids.tolist() == [1, 65536]


def test_ids_past_uint32_raise():
    with pytest.raises(TokenIdRangeError):
        ids_to_array([1, 1 << 32], np.dtype(np.uint16))
    with pytest.raises(TokenIdRangeError):
        ids_to_array([-1], np.dtype(np.uint16))


def test_common_prefix_len():
    a = np.array([1, 2, 3, 4])
    assert common_prefix_len(a, np.array([1, 2, 9])) == 2
    assert common_prefix_len(a, np.array([1, 2])) == 2
    assert common_prefix_len(a, np.array([], dtype=np.int64)) == 0

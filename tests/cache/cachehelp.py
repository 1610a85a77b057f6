"""Shared helpers of the cache tests: a deterministic fake tokenizer and source trees."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

from dlm.rows.types import FileRow, RowSet, TextRow

FAKE_SHA = "sha256:" + "f" * 64
OLD_NS = 1_600_000_000 * 10**9  # a fixed past mtime: files are not racy
SETTLE_NS = 3 * 10**9  # past the cache's racy window (RACY_NS)


def settled_clock() -> int:
    """The cache's clock for tests that rely on stat trust: reads are stamped 3 s
    ahead, as if the test's files (whose ctime is now: it cannot be set back) had been
    written more than the racy window before they were read."""
    return time.time_ns() + SETTLE_NS


@dataclass(frozen=True)
class FakeEncoding:
    ids: list[int]


class FakeBackend:
    """Byte-level: id = byte + 2; BOS (1) first when special tokens are added."""

    def encode_batch(self, texts: list[str], add_special_tokens: bool = True) -> list[FakeEncoding]:
        head = [1] if add_special_tokens else []
        return [FakeEncoding(head + [b + 2 for b in t.encode("utf-8", "surrogatepass")]) for t in texts]


class FakeTokenizer:
    """The parts of a fast tokenizer the seam uses (`dlm.tokenize.encode.SpecEncoder`)."""

    eos_token = "</s>"

    def __init__(self, vocab: int = 258) -> None:
        self.vocab = vocab
        self.backend_tokenizer = FakeBackend()

    def __len__(self) -> int:
        return self.vocab


def make_tree(root: Path, n: int, seed: int = 0, size: int = 400) -> list[Path]:
    """n text files of about `size` bytes, with old mtimes; one binary file."""
    rng = random.Random(seed)
    paths = []
    for i in range(n):
        p = root / f"pkg{i % 7}" / f"mod_{i:04d}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        words = " ".join(rng.choice(["def", "x", "return", "self", "import", "é", "λ"]) for _ in range(size // 4))
        p.write_text(f"# file {i}\n{words}\n")
        paths.append(p)
    blob = root / "image.bin"
    blob.write_bytes(b"\x89PNG\0\0" + bytes(range(256)))
    paths.append(blob)
    for p in paths:
        os.utime(p, ns=(OLD_NS, OLD_NS))
    return paths


def file_rows(root: Path, index: int = 0) -> list[FileRow]:
    """FileRows of every file under root, sorted by relpath (what a walk gives)."""
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out.append(
                FileRow(index, p, p.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
            )
    return out


def row_set(root: Path, texts: int = 3) -> RowSet:
    text_rows = [TextRow("prose", f"prose row {i}\n", f"doc.dlm:{i}") for i in range(texts)]
    text_rows.append(TextRow("instruction", "<q>hi</q><a>yo</a>", "doc.dlm:99", prompt_text="<q>hi</q><a>"))
    return RowSet(text_rows, file_rows(root))


def all_ids(rows) -> list[list[int]]:
    return [rows.read(i).tolist() for i in range(len(rows))]


def same_rows(got, want) -> bool:
    """Token for token, dtype for dtype, with equal keys, lengths and prompt lengths."""
    return (
        got.keys == want.keys
        and got.lengths.tolist() == want.lengths.tolist()
        and got.n_prompt.tolist() == want.n_prompt.tolist()
        and all(got.read(i).dtype == want.read(i).dtype for i in range(len(want)))
        and all_ids(got) == all_ids(want)
    )

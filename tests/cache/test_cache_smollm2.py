"""On the real SmolLM2 tokenizer over real files: the cache is the uncached path, token
for token, cold and warm, instruction rows included; and across an export/import."""

from __future__ import annotations

import shutil
import sysconfig
from pathlib import Path

import numpy as np
import pytest
from cachehelp import file_rows, same_rows

from dlm.cache import CachedRowEncoder, export_cache, import_cache
from dlm.errors import CacheError
from dlm.rows.types import RowSet, TextRow
from dlm.tokenize.fingerprint import tokenizer_sha256
from dlm.tokenize.plain import PlainRowEncoder

QA = [
    (None, "Where does json keep its decoder?", "In json/decoder.py."),
    ("Answer tersely.", "Ünïcödé, 日本語, 🎉?", "Yes: <|im_end|> is a special token."),
]


def chat_rows(tok) -> list[TextRow]:
    out = []
    for system, q, a in QA:
        prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": q}]
        out.append(
            TextRow(
                "instruction",
                tok.apply_chat_template(prompt + [{"role": "assistant", "content": a}], tokenize=False),
                "doc.dlm:5",
                prompt_text=tok.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True),
            )
        )
    return out


@pytest.fixture
def real_rows(tmp_path: Path, smollm2_tokenizer) -> RowSet:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    root = tmp_path / "lib"
    for src in sorted((stdlib / "json").glob("*.py")) + sorted(stdlib.glob("*.py"))[:25]:
        dest = root / src.relative_to(stdlib)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)  # keeps the old mtime: not racy
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")
    shutil.copystat(stdlib / "json" / "__init__.py", root / "latin1.txt")
    text = [TextRow("prose", "# Notes\n\nThe decoder lives in json/decoder.py.\n", "doc.dlm:1")]
    return RowSet(text + chat_rows(smollm2_tokenizer), file_rows(root))


def test_cache_matches_plain_on_smollm2(real_rows: RowSet, smollm2_tokenizer, cache_dir: Path):
    tok, sha = smollm2_tokenizer, tokenizer_sha256(smollm2_tokenizer)
    want = PlainRowEncoder(tok, sha).tokenize(real_rows)
    cold = CachedRowEncoder(cache_dir, tok, sha, max_bytes=1 << 30, run_id="cold").tokenize(real_rows)
    warm = CachedRowEncoder(cache_dir, tok, sha, max_bytes=1 << 30, run_id="warm").tokenize(real_rows)
    assert same_rows(cold, want) and same_rows(warm, want)
    assert warm.stats.cache_hits == len(want) and warm.read(0).dtype == np.uint16
    assert 0 < int(warm.n_prompt[1]) < int(warm.lengths[1])
    assert warm.lossy_files == want.lossy_files == 1


def test_export_import_round_trip_on_smollm2(real_rows, smollm2_tokenizer, cache_dir, tmp_path):
    tok, sha = smollm2_tokenizer, tokenizer_sha256(smollm2_tokenizer)
    CachedRowEncoder(cache_dir, tok, sha, max_bytes=1 << 30, run_id="a").tokenize(real_rows)
    exported = export_cache(cache_dir, tmp_path / "cache.tar")
    assert exported.entries == len(real_rows.text_rows) + len(real_rows.file_rows)
    other = tmp_path / "other" / "tokenized-cache"
    with pytest.raises(CacheError, match="tokenizer"):
        import_cache(other, tmp_path / "cache.tar", "sha256:" + "0" * 64, max_bytes=1 << 30)
    result = import_cache(other, tmp_path / "cache.tar", sha, max_bytes=1 << 30)
    assert result.entries_imported == exported.entries and result.corrupt_skipped == 0
    got = CachedRowEncoder(other, tok, sha, max_bytes=1 << 30, run_id="b").tokenize(real_rows)
    assert got.stats.cache_misses == 0
    assert same_rows(got, PlainRowEncoder(tok, sha).tokenize(real_rows))

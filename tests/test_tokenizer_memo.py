"""The tokenizer fingerprint memo: a hit is the value a fresh load gives, any change to
the files a load reads is a miss, and a warm run never imports `transformers`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from tokhelp import DOC, qwen3_folder

from dlm.models import load_tokenizer
from dlm.models.base import BaseModelRef
from dlm.tokenize.deferred import MEMO_ENTRIES, DeferredTokenizer, FingerprintMemo, deferred_tokenizer
from dlm.tokenize.fingerprint import tokenizer_sha256


def tokenizer_copy(src: Path, dest: Path) -> BaseModelRef:
    """The tokenizer files of `src` (no weights) in a folder of their own."""
    dest.mkdir()
    for p in src.iterdir():
        if p.is_file() and not p.name.endswith((".safetensors", ".bin", ".gguf")):
            shutil.copy2(p, dest / p.name)
    return BaseModelRef("copy", dest, "sha256:x")


@pytest.mark.parametrize("family", ["smollm2", "qwen3"])
def test_a_hit_is_what_a_fresh_load_gives_and_loads_nothing(family: str, smollm2_ref: Any) -> None:
    ref = smollm2_ref if family == "smollm2" else BaseModelRef("qwen3", qwen3_folder(), "sha256:x")
    first, sha = deferred_tokenizer(ref)
    assert first.loaded is not None  # a miss loads and hashes
    assert sha == tokenizer_sha256(load_tokenizer(ref))
    again, sha_again = deferred_tokenizer(ref)
    assert again.loaded is None and sha_again == sha
    assert len(again) == len(first.loaded) and again.loaded is not None  # first use loads it


def test_any_change_to_a_file_the_load_reads_is_a_miss(tmp_path: Path, smollm2_ref: Any) -> None:
    ref = tokenizer_copy(smollm2_ref.path, tmp_path / "tok")
    _, sha = deferred_tokenizer(ref)
    template = ref.path / "chat_template.jinja"
    template.write_text(template.read_text() + " ")
    edited, sha_edited = deferred_tokenizer(ref)
    assert edited.loaded is not None and sha_edited != sha
    assert sha_edited == tokenizer_sha256(load_tokenizer(ref))
    os.utime(ref.path / "tokenizer.json", ns=(1, 1))  # same bytes, other times: still a miss
    touched, sha_touched = deferred_tokenizer(ref)
    assert touched.loaded is not None and sha_touched == sha_edited
    (ref.path / "added_tokens.json").write_text("{}")  # a new file the load may read
    added, _ = deferred_tokenizer(ref)
    assert added.loaded is not None


def test_a_damaged_memo_is_a_miss_and_is_rewritten(smollm2_ref: Any, dlm_home: Path) -> None:
    _, sha = deferred_tokenizer(smollm2_ref)
    memo = FingerprintMemo()
    for damage in ("{not json", '{"entries": {"a": "b"}}', '{"entries": [["k"]]}', "[]"):
        memo.path.write_text(damage)
        tokenizer, got = deferred_tokenizer(smollm2_ref)
        assert tokenizer.loaded is not None and got == sha
    assert len(json.loads(memo.path.read_text())["entries"]) == 1


def test_the_memo_keeps_the_newest_entries(tmp_path: Path) -> None:
    memo = FingerprintMemo(tmp_path / "memo.json")
    for i in range(MEMO_ENTRIES + 3):
        memo.put(f"key{i}", f"sha256:{i}")
    kept = memo.read()
    assert len(kept) == MEMO_ENTRIES and list(kept)[0] == "key3"  # the three oldest went
    memo.put("key3", "sha256:3")  # used again: the newest now
    memo.put("new", "sha256:new")  # so the oldest is key4
    kept = memo.read()
    assert len(kept) == MEMO_ENTRIES and list(kept)[-2:] == ["key3", "new"] and "key4" not in kept


RUNNER = """
import sys
from dlm.cli.main import app
for command in sys.argv[2:]:
    app([*command.split(), sys.argv[1]], standalone_mode=False)
print("transformers" in sys.modules, file=sys.stderr)
"""


def test_a_warm_run_never_imports_transformers(tmp_path: Path, smollm2_ref: Any) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for p in sorted((Path(sysconfig.get_paths()["stdlib"]) / "json").glob("*.py")):
        shutil.copy(p, src / p.name)
    doc = tmp_path / "doc.dlm"
    doc.write_text(DOC)

    def run(*commands: str) -> str:
        proc = subprocess.run([sys.executable, "-c", RUNNER, str(doc), *commands], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr.strip().splitlines()[-1]

    assert run("cache build") == "True"  # cold: rows to encode
    assert run("cache build", "cache show", "show") == "False"  # the instruction pair too
    (src / "new.py").write_text("x = 1\n")
    assert run("cache build") == "True"  # one miss: the tokenizer loads to encode it


MESSAGES = [{"role": "user", "content": "Where?"}, {"role": "assistant", "content": "Here."}]


def test_remembered_renderings_equal_the_template_and_load_nothing(smollm2_ref: Any) -> None:
    first, _ = deferred_tokenizer(smollm2_ref)
    rendered = first.apply_chat_template(MESSAGES, tokenize=False)
    prompt = first.apply_chat_template(MESSAGES[:1], tokenize=False, add_generation_prompt=True)
    first.save()
    real = load_tokenizer(smollm2_ref)
    assert rendered == real.apply_chat_template(MESSAGES, tokenize=False)
    again, _ = deferred_tokenizer(smollm2_ref)
    assert again.chat_template == real.chat_template
    assert again.apply_chat_template(MESSAGES, tokenize=False) == rendered
    assert again.apply_chat_template(MESSAGES[:1], tokenize=False, add_generation_prompt=True) == prompt
    assert again.loaded is None
    assert again.apply_chat_template(MESSAGES[:1], tokenize=False) != prompt  # other arguments, other key
    assert again.loaded is not None


def test_a_template_that_reads_the_date_is_never_remembered(tmp_path: Path, smollm2_ref: Any) -> None:
    ref = tokenizer_copy(smollm2_ref.path, tmp_path / "tok")
    (ref.path / "chat_template.jinja").write_text("{{ strftime_now('%H:%M:%S.%f') }}{{ messages[0]['content'] }}")
    first, _ = deferred_tokenizer(ref)
    first.apply_chat_template(MESSAGES, tokenize=False)
    first.save()
    again, _ = deferred_tokenizer(ref)
    assert again.loaded is None
    again.apply_chat_template(MESSAGES, tokenize=False)
    assert again.loaded is not None  # rendered anew


def test_a_copy_is_a_stand_in_too(smollm2_ref: Any) -> None:
    import copy

    deferred_tokenizer(smollm2_ref)  # a miss: the memo learns the fingerprint
    tokenizer, _ = deferred_tokenizer(smollm2_ref)
    clone = copy.copy(tokenizer)
    assert clone.loaded is None and clone.ref == smollm2_ref
    assert copy.deepcopy(tokenizer).loaded is None
    with pytest.raises(AttributeError):
        DeferredTokenizer.__new__(DeferredTokenizer).loaded  # noqa: B018  # no __init__: no recursion

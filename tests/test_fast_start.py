"""Commands that never train load no torch, and the tokenizer loads through its fast
class with the same fingerprint and ids as `AutoTokenizer`."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from tokhelp import DOC, qwen3_folder

from dlm.models import load_tokenizer
from dlm.models.base import BaseModelRef
from dlm.tokenize.fingerprint import tokenizer_sha256

RUNNER = """
import sys
from dlm.cli.main import app
doc = sys.argv[1]
for command in sys.argv[2:]:
    app([*command.split(), doc], standalone_mode=False)
    print(command, "imported torch" if "torch" in sys.modules else "did not import torch", file=sys.stderr)
"""


def sample_texts() -> list[str]:
    json_dir = Path(sysconfig.get_paths()["stdlib"]) / "json"
    texts = [p.read_text() for p in sorted(json_dir.glob("*.py"))]
    return texts + ["Ünïcödé 日本語 🎉 12345 <|im_end|> <|endoftext|>", "  leading\tand trailing  \n\n"]


@pytest.mark.parametrize("family", ["smollm2", "qwen3"])
def test_fast_class_matches_auto_tokenizer(family: str, smollm2_ref: Any) -> None:
    from transformers import AutoTokenizer

    folder = smollm2_ref.path if family == "smollm2" else qwen3_folder()
    fast = load_tokenizer(BaseModelRef(family, folder, "sha256:x"))
    auto = AutoTokenizer.from_pretrained(folder)
    assert type(fast) is type(auto)
    assert tokenizer_sha256(fast) == tokenizer_sha256(auto)
    assert len(fast) == len(auto)
    texts = sample_texts()
    assert fast(texts)["input_ids"] == auto(texts)["input_ids"]
    messages = [{"role": "user", "content": "Where?"}, {"role": "assistant", "content": "Here."}]
    assert fast.apply_chat_template(messages, tokenize=False) == auto.apply_chat_template(messages, tokenize=False)


def test_folder_without_a_named_class_falls_back_to_auto(tmp_path: Path, smollm2_ref: Any) -> None:
    import shutil

    import transformers

    from dlm.models.base import _fast_tokenizer_class

    for name in ("tokenizer.json", "chat_template.jinja"):
        shutil.copy(smollm2_ref.path / name, tmp_path / name)
    assert _fast_tokenizer_class(tmp_path, transformers) is None  # no tokenizer_config.json
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "os.system"}')
    assert _fast_tokenizer_class(tmp_path, transformers) is None
    (tmp_path / "tokenizer_config.json").write_text('{"tokenizer_class": "AutoModel"}')
    assert _fast_tokenizer_class(tmp_path, transformers) is None  # not a tokenizer class
    assert _fast_tokenizer_class(smollm2_ref.path, transformers) is not None


def test_commands_that_do_not_train_never_import_torch(tmp_path: Path, smollm2_ref: Any) -> None:
    src = tmp_path / "src"
    src.mkdir()
    for p in sorted((Path(sysconfig.get_paths()["stdlib"]) / "json").glob("*.py")):
        (src / p.name).write_text(p.read_text())
    doc = tmp_path / "doc.dlm"
    doc.write_text(DOC)
    commands = ["cache build", "cache build", "cache show", "show", "metrics", "cache prune"]
    proc = subprocess.run([sys.executable, "-c", RUNNER, str(doc), *commands], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.count("did not import torch") == len(commands), proc.stderr

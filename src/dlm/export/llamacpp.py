"""Where llama.cpp's own converter lives, and running it.

`convert_lora_to_gguf.py` (LoRA adapters) and `convert_hf_to_gguf.py` (whole models,
for `--format gguf-merged`), with their `conversion/` package and `gguf-py/`, ship in the llama-cpp-python source distribution on PyPI, not
in its wheel or in the `gguf` package. `make install` downloads the pinned sdist
(`LLAMA_CPP_PYTHON_VERSION`, sha256 checked) and unpacks those files into
`<venv>/share/dlm/llama.cpp-<version>/`; nothing of it is copied into this
repository. `DLM_LLAMA_CPP_DIR` points elsewhere (a llama.cpp checkout).

The converter runs in a subprocess: it puts its own `gguf-py` first on `sys.path`,
which must not shadow the `gguf` package this process uses. Its failure is reported as
one line: its last line that is not a progress bar, with the output path it was given
replaced by the export folder; a full disk says so.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dlm.errors import ExportError

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
CONVERTER = "convert_lora_to_gguf.py"
HF_CONVERTER = "convert_hf_to_gguf.py"
GGUF_OUTTYPES = ("f32", "f16", "bf16", "q8_0")
PROGRESS_LINE = re.compile(r"\d+%\||it/s\]|s/it\]")
ENV_DIR = "DLM_LLAMA_CPP_DIR"


def llama_cpp_dir() -> Path:
    """The folder holding `convert_lora_to_gguf.py` (see the module docstring)."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        return Path(configured)
    return Path(sys.prefix) / "share" / "dlm" / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}"


def converter_path(name: str = CONVERTER) -> Path:
    """Path of llama.cpp's `convert_lora_to_gguf.py` (or `name`, e.g. `HF_CONVERTER`).

    Raises:
        ExportError: not installed, with the way out.
    """
    script = llama_cpp_dir() / name
    if not script.is_file():
        raise ExportError(
            f"{script}: llama.cpp's converter is not installed; run `make install` (it unpacks it from "
            f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}'s source distribution) or set {ENV_DIR} to a "
            f"llama.cpp checkout"
        )
    return script


def convert_lora(adapter_dir: Path, base_config: Path, out_file: Path) -> None:
    """Convert a peft LoRA folder to a float32 GGUF adapter with llama.cpp's converter.

    The converter sees copies under fixed names (`adapter/` with only the config and
    the safetensors file, `base/` with only `config.json`, all it reads), so neither a
    model card nor a folder name can reach the file's metadata.

    Args:
        adapter_dir: peft folder (`adapter_config.json`, `adapter_model.safetensors`).
        base_config: the base model's `config.json`.
        out_file: where the GGUF goes (its metadata is normalized afterwards, see
            `dlm.export.gguf_file`).

    Raises:
        ExportError: the converter is missing or fails (its last output line is shown).
    """
    script = converter_path()
    with tempfile.TemporaryDirectory(prefix="dlm-export-") as tmp:
        work = Path(tmp)
        (work / "adapter").mkdir()
        (work / "base").mkdir()
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copyfile(adapter_dir / name, work / "adapter" / name)
        shutil.copyfile(base_config, work / "base" / "config.json")
        _run(
            script,
            ["--base", "base", "--outtype", "f32", "--outfile", str(Path(out_file).resolve()), "adapter"],
            work,
            Path(out_file),
            f"{adapter_dir}: llama.cpp's LoRA converter failed",
        )


def convert_model(hf_dir: Path, out_file: Path, *, outtype: str, model_name: str) -> None:
    """Convert a transformers folder to one GGUF with llama.cpp's `convert_hf_to_gguf.py`.

    Args:
        hf_dir: `config.json`, `model.safetensors`, tokenizer files (chat template included).
        out_file: the GGUF to write.
        outtype: one of `GGUF_OUTTYPES` (`q8_0` quantizes in the converter itself).
        model_name: `general.name` (instead of one guessed from folder names).

    Raises:
        ExportError: the converter is missing or fails (one line; a full disk says so).
    """
    if outtype not in GGUF_OUTTYPES:
        raise ExportError(f"--dtype {outtype}: a merged GGUF is one of {', '.join(GGUF_OUTTYPES)}")
    script = converter_path(HF_CONVERTER)
    _run(
        script,
        [
            "--outtype",
            outtype,
            "--model-name",
            model_name,
            "--outfile",
            str(Path(out_file).resolve()),
            str(Path(hf_dir).resolve()),
        ],
        Path(hf_dir).parent,
        Path(out_file),
        "llama.cpp's converter failed",
    )


def _run(script: Path, args: list[str], cwd: Path, out_file: Path, failure: str) -> None:
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    env.pop("NO_LOCAL_GGUF", None)
    proc = subprocess.run([sys.executable, str(script), *args], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode == 0:
        return
    from dlm.export.publish import DISK_FULL_SIGNS

    output = proc.stderr + proc.stdout
    if any(sign in output for sign in (*DISK_FULL_SIGNS, f"[Errno {errno.ENOSPC}]")):
        raise OSError(errno.ENOSPC, "No space left on device", str(out_file))
    lines = [
        line.strip()
        for line in output.replace("\r", "\n").splitlines()
        if line.strip() and not PROGRESS_LINE.search(line)
    ]
    last = lines[-1] if lines else f"exit status {proc.returncode}"
    last = last.replace(str(Path(out_file).resolve().parent), "<export folder>")
    if last.startswith("ModuleNotFoundError"):
        last += " (a package the converter imports; run `make install`)"
    raise ExportError(f"{failure}: {last}")

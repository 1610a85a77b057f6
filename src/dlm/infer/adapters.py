"""One base model, many documents' adapters: peft named adapters over a single copy.

Each document whose current adapter is loaded gets the peft adapter name
`adapter_name(dlm_id, version)` (`d<dlm_id>_<version>`: peft names are module keys,
so no dots), one per published version: a newly published version is loaded beside
the old one and the old one deleted once nothing uses it (`dlm.serve.reload`).
Generating with one adapter is `model.set_adapter(name)`; the base model alone is
`model.disable_adapter()`.

All documents must name the same base model weights (the same `BaseModelRef.revision`);
a server for documents on different bases would need one copy of each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dlm.errors import StoreError
from dlm.models import BaseModelRef, load_model, load_tokenizer, resolve_base_model
from dlm.store import open_store


def adapter_name(dlm_id: str, version: str) -> str:
    """The peft adapter name of one document's adapter version."""
    return f"d{dlm_id}_{version}"


@dataclass(frozen=True)
class DocumentAdapter:
    """One document as served.

    Attributes:
        path: the `.dlm` file. name: its file stem (a model name clients may use).
        dlm_id: the document's id. system_prompt: its frontmatter `system_prompt`.
        version: the adapter version loaded (None: the base model alone).
        adapter: its peft adapter name (None: the base model alone).
    """

    path: Path
    name: str
    dlm_id: str
    system_prompt: str | None
    version: str | None
    adapter: str | None


@dataclass
class SharedBase:
    """The base model (a `peft.PeftModel` when any adapter is loaded), its tokenizer,
    and the documents served over it."""

    model: Any
    tokenizer: Any
    base: BaseModelRef
    documents: list[DocumentAdapter]


def resolve_shared_base(docs: Sequence[Any]) -> BaseModelRef:
    """The one base model every document names.

    Raises:
        StoreError: two documents name different base model weights.
        BaseModelError: a base model cannot be resolved.
    """
    refs = [
        (doc, resolve_base_model(doc.frontmatter.base_model, relative_to=doc.path.parent if doc.path else None))
        for doc in docs
    ]
    first_doc, first = refs[0]
    for doc, ref in refs[1:]:
        if ref.revision != first.revision:
            raise StoreError(
                f"{doc.path}: base model {ref.name!r} differs from {first.name!r} of {first_doc.path}; "
                f"one server shares one base model: serve these documents from separate servers"
            )
    return first


def load_shared_base(docs: Sequence[Any], *, use_adapter: bool = True) -> SharedBase:
    """Load the documents' base model once and each document's current adapter on it.
    Every adapter is found and checked against its recorded hash before the model loads.

    Raises:
        StoreError: a document has no trained adapter (and `use_adapter`), its adapter's
            files differ from the hash training recorded (`dlm.infer.integrity`), or the
            documents name different base models.
        BaseModelError: the base model cannot be resolved.
    """
    ref = resolve_shared_base(docs)
    found = [current_adapter(doc) if use_adapter else None for doc in docs]
    tokenizer = load_tokenizer(ref)
    model = load_model(ref)
    served: list[DocumentAdapter] = []
    for doc, current in zip(docs, found, strict=True):
        fm = doc.frontmatter
        path = _doc_path(doc)
        version = adapter = None
        if current is not None:
            version, adapter_dir = current
            adapter = adapter_name(fm.dlm_id, version)
            model = attach_adapter(model, adapter_dir, adapter)
        served.append(DocumentAdapter(path, path.stem, fm.dlm_id, fm.system_prompt, version, adapter))
    model.eval()
    return SharedBase(model, tokenizer, ref, served)


def _doc_path(doc: Any) -> Path:
    return Path(doc.path) if doc.path else Path(f"{doc.frontmatter.dlm_id}.dlm")


def current_adapter(doc: Any) -> tuple[str, Path]:
    """The current adapter version of `doc` and its folder, checked against its recorded hash.

    Raises:
        StoreError: no adapter trained yet, `current` names a missing version, or the
            adapter's files differ from the hash training recorded.
    """
    from dlm.infer.integrity import verify_adapter

    path = _doc_path(doc)
    store = open_store(doc.frontmatter.dlm_id)
    version = store.current_version()
    if version is None:
        raise StoreError(
            f"{path}: no trained adapter yet; run `dlm train {path}` first, or pass --no-adapter to use the base model"
        )
    adapter_dir = store.adapter_root / "versions" / version
    way_out = f"retrain with `dlm train {path}`, or pass --no-adapter to use the base model alone"
    verify_adapter(store, version, adapter_dir, way_out=way_out, error=StoreError)
    return version, adapter_dir


def attach_adapter(model: Any, adapter_dir: Path, name: str) -> Any:
    """Load the peft adapter in `adapter_dir` under `name`; the first one wraps the
    base model in a `PeftModel` (returned), later ones are added to it."""
    from peft import PeftModel

    if isinstance(model, PeftModel):
        model.load_adapter(str(adapter_dir), adapter_name=name)
        return model
    return PeftModel.from_pretrained(model, str(adapter_dir), adapter_name=name)

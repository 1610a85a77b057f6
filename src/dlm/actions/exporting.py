"""`dlm export`: a document's adapter, written for llama.cpp, Ollama, vLLM or transformers.

Order of work (nothing is written until every check has passed):
1. read the document's frontmatter (problems in its body are a warning: the adapter was
   trained from an earlier body), open its store, pick the adapter version (`current` by default);
2. hash the adapter folder and compare it with the `adapter_sha256` training recorded
   (the manifest's entry for that version, and the lock's when its last run made it):
   a damaged adapter is refused, so neither the export nor `--verify` ever reads it;
3. resolve the base model and compare its identity with the one the store's
   `dlm.lock` records (the manifest's when there is no lock): an adapter on another
   base is refused;
4. refuse what the format cannot express (`dlm.export.adapter`);
5. write the format through a staging folder published by rename (`dlm.export`);
6. with `verify`, run the check that fits the format and this machine (`dlm.export.verify`).

Default output folder: `<document folder>/<document stem>-<version>-<format>/`.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dlm.actions.common import DocPath, open_document
from dlm.doc import Frontmatter
from dlm.doc.problems import DocProblem
from dlm.export import FORMATS, BaseSpec, ExportError, ExportRefused, VerifyResult
from dlm.export.formats import Written
from dlm.export.publish import Destination, check_destination, os_error_line
from dlm.models import BaseModelRef, load_tokenizer, resolve_base_model
from dlm.store import Store


@dataclass(frozen=True)
class ExportReport:
    """The outcome of `dlm export` (`--json` prints `as_dict()`).

    Attributes:
        format: gguf, ollama, merged or peft.
        out: the published folder; `files` are relative to it, sorted.
        adapter_version: the store version exported (`v0003`); `adapter_dir` its folder.
        adapter_sha256: the exported adapter folder's hash (`dlm.lock.adapter`), checked
            against `adapter_checked_against` (`manifest`, `manifest+lock`, `none`) first.
        base_model, base_revision: the base as the document names it, and its identity.
        base_checked_against: `lock`, `manifest`, or `none` when the store records no base.
        command: how to run the export (llama-cli, ollama create, vllm serve).
        system_prompt: `{"source", "text", "carried_in"}` (`system_prompt_note`).
        dtype: the weights' dtype for merged / gguf-merged (the GGUF outtype), else None.
        warnings: what the user should know that did not stop the export (body problems).
        verify: the `--verify` result (`VerifyResult.as_dict()`), or None.
    """

    format: str
    out: str
    files: tuple[str, ...]
    adapter_version: str
    adapter_dir: str
    adapter_sha256: str
    adapter_checked_against: str
    base_model: str
    base_revision: str
    base_checked_against: str
    command: str
    system_prompt: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None
    warnings: tuple[str, ...] = ()
    verify: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def resolve_adapter(store: Store, version: str | None) -> tuple[str, Path]:
    """The adapter version to export and its folder (`current` when `version` is None).

    Raises:
        ExportError: no adapter trained yet, or `version` is not in the store.
        StoreError: `current` points at a missing version.
    """
    if version is None:
        current = store.current_version()
        if current is None:
            raise ExportError(f"{store.root}: no adapter trained yet; run `dlm train` on the document first")
        return current, store.adapter_root / "versions" / current
    if version not in store.versions():
        known = ", ".join(store.versions()) or "none"
        raise ExportError(f"--adapter-version {version}: not in {store.adapter_root} (versions: {known})")
    return version, store.adapter_root / "versions" / version


def check_base(store: Store, ref: BaseModelRef) -> str:
    """Refuse a base whose identity differs from the one the store recorded at training.

    Returns:
        `lock`, `manifest` or `none`: what the base was checked against.

    Raises:
        ExportRefused: the recorded revision differs from `ref.revision`.
        LockValidationError: the lock file is damaged.
    """
    from dlm.lock import read_lock

    recorded: str | None
    name: str | None
    if store.lock_path.is_file():
        pin = read_lock(store.lock_path).base_model
        recorded, name, source = pin.revision, pin.name, "lock"
    else:
        base = store.read_manifest().get("base_model") or {}
        recorded, name, source = base.get("revision"), base.get("name"), "manifest"
        if not recorded:
            return "none"
    if recorded != ref.revision:
        where = store.lock_path if source == "lock" else store.manifest_path
        raise ExportRefused(
            f"{where}: the adapter was trained on base {name!r} {recorded}, but base_model "
            f"{ref.name!r} is now {ref.revision}; restore that base, or retrain with `dlm train`"
        )
    return source


def check_adapter_hash(store: Store, version: str, adapter_dir: Path) -> tuple[str, str]:
    """Hash the adapter folder and compare it with what training recorded
    (`dlm.infer.integrity.verify_adapter`, the rule `dlm prompt` and `dlm serve` apply too).

    Returns:
        (`sha256:<hex>` of the folder, what it was checked against: `manifest`,
        `manifest+lock`, or `none` for a store that recorded no hash).

    Raises:
        ExportRefused: the folder differs from a recorded hash (damaged or edited after
            training), or it cannot be read.
    """
    from dlm.infer.integrity import verify_adapter

    return verify_adapter(
        store,
        version,
        adapter_dir,
        error=ExportRefused,
        way_out="retrain with `dlm train`, or export another --adapter-version",
    )


def base_spec(ref: BaseModelRef) -> BaseSpec:
    """The base as the writers need it; its GGUF is the alias's shipped file, or the
    one `*.gguf` file in a local base folder."""
    from dlm.models.base import ALIASES, alias_gguf_path

    if ref.name in ALIASES:
        return BaseSpec(name=ref.name, path=ref.path, gguf=alias_gguf_path(ref.name))
    ggufs = sorted(ref.path.glob("*.gguf"))
    return BaseSpec(
        name=Path(ref.name).name or ref.path.name, path=ref.path, gguf=ggufs[0] if len(ggufs) == 1 else None
    )


def _model_name(doc_path: Path) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", doc_path.stem.lower()).strip("-.") or "dlm"


def open_for_export(doc_path: Path) -> tuple[Frontmatter, Store, list[str]]:
    """The document's frontmatter, its store, and warnings.

    Export needs only the frontmatter (`dlm_id`, `base_model`, `system_prompt`): the
    adapter was trained from an earlier, valid body. So a body with problems is a
    warning that names the first one, not a refusal; a bad frontmatter still refuses.

    Raises:
        DocError: the file cannot be read, or its frontmatter has problems.
    """
    from dlm.doc import DocParseError
    from dlm.doc.frontmatter import read_frontmatter, split_text
    from dlm.store import open_store

    try:
        doc, store = open_document(doc_path)
        return doc.frontmatter, store, []
    except DocParseError as exc:
        text = doc_path.read_text(encoding="utf-8").removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
        split = split_text(text)
        frontmatter = read_frontmatter(split.yaml_text) if not isinstance(split, DocProblem) else None
        if not isinstance(frontmatter, Frontmatter):
            raise
        first = exc.problems[0].render(exc.where)
        warning = (
            f"{first} (and {len(exc.problems) - 1} more problem(s) in the body): exported the adapter "
            f"already trained, which they do not affect; fix them before the next `dlm train`"
        )
        return frontmatter, open_store(frontmatter.dlm_id), [warning]


CARRIED_IN = {
    "gguf": ("the printed command (-sys); an adapter GGUF holds no chat template",),
    "ollama": ("Modelfile SYSTEM",),
    "merged": ("chat_template.jinja", "tokenizer_config.json chat_template"),
    "peft": ("chat_template.jinja", "tokenizer_config.json chat_template", "the printed command (--chat-template)"),
    "gguf-merged": ("model.gguf tokenizer.chat_template", "Modelfile SYSTEM"),
}
GGUF_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "q8_0": "q8_0"}


def system_prompt_note(format: str, system_prompt: str | None) -> dict[str, Any]:
    """What the report says of the system prompt: its source, text and where the export
    carries it. Without one (None or ""), the chat template's own default system turn
    applies everywhere, as in training (`dlm.chat.with_system_prompt`)."""
    if system_prompt:
        return {"source": "document", "text": system_prompt, "carried_in": list(CARRIED_IN[format])}
    return {"source": "chat template default", "text": None, "carried_in": list(CARRIED_IN[format])}


def _dtype_for(format: str, dtype: str | None) -> str | None:
    from dlm.errors import UsageError
    from dlm.export.merge import DTYPES

    if dtype is None:
        return None
    if format == "merged" and dtype in DTYPES:
        return dtype
    if format == "gguf-merged" and dtype in GGUF_DTYPES:
        return GGUF_DTYPES[dtype]
    if format in ("merged", "gguf-merged"):
        allowed = DTYPES if format == "merged" else tuple(GGUF_DTYPES)
        raise UsageError(f"--dtype {dtype}: --format {format} takes one of {', '.join(allowed)}")
    raise UsageError(f"--dtype {dtype}: only --format merged and gguf-merged have a dtype")


def export(
    path: DocPath,
    format: str = "gguf",
    out: str | Path | None = None,
    adapter_version: str | None = None,
    verify: bool = False,
    force: bool = False,
    dtype: str | None = None,
) -> ExportReport:
    """Export the adapter of the document at `path` (module docstring).

    Args:
        format: one of `dlm.export.FORMATS`.
        out: destination folder; an earlier export there is replaced, any other
            non-empty folder refused (`dlm.export.publish`).
        adapter_version: a store version (`v0002`); None exports `current`.
        verify: run the check of `dlm.export.verify` that fits the format.
        force: replace a folder dlm did not write (never the document's, a store, `$DLM_HOME`
            or the working folder: `dlm.export.publish`).
        dtype: merged: float32 (default), float16, bfloat16; gguf-merged: float16
            (default), q8_0, bfloat16, float32.

    Raises:
        DocError: the document cannot be read or its frontmatter is invalid.
        UsageError: a dtype the format does not take.
        ExportError: unknown format, no adapter, missing converter, failed conversion.
        ExportRefused: a damaged adapter, a base other than the lock's, a destination
            that may not be replaced, or an adapter the format cannot express.
        BaseModelError: the base cannot be resolved.
    """
    if format not in FORMATS:
        raise ExportError(f"--format {format}: unknown; choose one of {', '.join(FORMATS)}")
    dtype = _dtype_for(format, dtype)
    doc_path = Path(path)
    frontmatter, store, warnings = open_for_export(doc_path)
    version, adapter_dir = resolve_adapter(store, adapter_version)
    sha, sha_checked = check_adapter_hash(store, version, adapter_dir)
    ref = resolve_base_model(frontmatter.base_model, relative_to=doc_path.parent)
    checked = check_base(store, ref)
    base = base_spec(ref)
    folder = Path(out) if out is not None else doc_path.parent / f"{doc_path.stem}-{version}-{format}"
    target = Destination(folder, force=force, keep=(doc_path, store.root))
    check_destination(target)
    name, system = _model_name(doc_path), frontmatter.system_prompt
    tokenizer = load_tokenizer(ref) if format != "gguf" or verify else None
    try:
        written = _write(format, adapter_dir, base, target, tokenizer, system, name, dtype)
        result = _verify(format, written.out, adapter_dir, base, tokenizer) if verify else None
    except OSError as exc:  # a file the writers read or write, outside the staging folder's own handling
        raise ExportError(os_error_line(exc, folder)) from exc
    return ExportReport(
        format=format,
        out=str(written.out),
        files=written.files,
        adapter_version=version,
        adapter_dir=str(adapter_dir),
        adapter_sha256=sha,
        adapter_checked_against=sha_checked,
        base_model=ref.name,
        base_revision=ref.revision,
        base_checked_against=checked,
        command=written.command,
        system_prompt=system_prompt_note(format, system),
        dtype=_reported_dtype(format, dtype),
        warnings=tuple(warnings),
        verify=result.as_dict() if result else None,
    )


def _write(
    format: str,
    adapter_dir: Path,
    base: BaseSpec,
    target: Destination,
    tokenizer: Any,
    system: str | None,
    name: str,
    dtype: str | None,
) -> Written:
    from dlm.export import write_gguf, write_merged, write_ollama, write_peft
    from dlm.export.merged_gguf import DEFAULT_OUTTYPE, write_gguf_merged

    if format == "gguf":
        return write_gguf(adapter_dir, base, target, system_prompt=system)
    elif format == "ollama":
        return write_ollama(adapter_dir, base, target, tokenizer, system_prompt=system, model_name=name)
    elif format == "merged":
        return write_merged(adapter_dir, base, target, tokenizer, system_prompt=system, dtype=dtype or "float32")
    elif format == "gguf-merged":
        return write_gguf_merged(
            adapter_dir,
            base,
            target,
            tokenizer,
            system_prompt=system,
            model_name=name,
            outtype=dtype or DEFAULT_OUTTYPE,
        )
    else:
        return write_peft(adapter_dir, base, target, model_name=name, tokenizer=tokenizer, system_prompt=system)


def _reported_dtype(format: str, dtype: str | None) -> str | None:
    from dlm.export.merged_gguf import DEFAULT_OUTTYPE

    if format == "merged":
        return dtype or "float32"
    if format == "gguf-merged":
        return dtype or DEFAULT_OUTTYPE
    return None


def _verify(fmt: str, out: Path, adapter_dir: Path, base: BaseSpec, tokenizer: Any) -> VerifyResult:
    from dlm.export import verify as checks
    from dlm.export.adapter import read_adapter
    from dlm.export.gguf_file import GGUF_NAME

    if fmt == "merged":
        return checks.verify_merged(out, base.path, adapter_dir, tokenizer)
    if fmt == "gguf-merged":
        return checks.verify_gguf_merged(out, base.path, adapter_dir, tokenizer)
    if fmt == "peft":
        return checks.verify_peft(out, base.path, adapter_dir, tokenizer)
    if checks.llama_cpp_available() and base.gguf is not None:
        return checks.verify_llama_cpp(out / GGUF_NAME, base.gguf, base.path, adapter_dir, tokenizer)
    alpha = read_adapter(adapter_dir).gguf_alpha()
    return checks.verify_gguf_tensors(out / GGUF_NAME, adapter_dir, base.path / "config.json", alpha)

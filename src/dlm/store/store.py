"""The per-document store.

    $DLM_HOME/store/<dlm_id>/
        manifest.json            canonical JSON: dlm_id, document path, base model,
                                 adapter versions with their run ids and sha256
        dlm.lock                 determinism lock (dlm.lock package)
        metrics.sqlite           runs and per-step loss (dlm.metrics)
        heldout-base.json        the base model's held-out score, kept for the next run
                                 (dlm.train.base_score)
        judge-base.json          the base model's side of the last evaluation, kept for
                                 the next one (dlm.judge.memo)
        judge-reports/           whole evaluations by adapter, so `dlm eval` after
                                 `dlm train` reads what training scored (dlm.judge.memo)
        tokenized-cache/         this document's cache state (dlm.cache; entries live in
                                 the shared store, dlm.paths.cache_store_dir)
        adapter/
            current              text file naming the current version, e.g. "v0003"
            versions/v0001/      a peft adapter folder (adapter_model.safetensors, ...)
            .staging-<run_id>/   a version being written; never read as an adapter
                checkpoints/     the run's checkpoints (dlm.train.checkpoint): kept
                                 when the run is interrupted, for `dlm train --resume`
        train.lock               held by the one `dlm train` allowed at a time

Why it cannot be corrupted:
- one writer: `train_lock()` is a non-blocking file lock; a second `dlm train` on the
  same document fails at once with a clear message instead of interleaving writes;
- an adapter is written into `.staging-<run_id>/`, renamed to `versions/vNNNN/` only
  when complete, and only then is `current` replaced (atomically). Ctrl-C or a crash
  at any point leaves the previous `current` and its folder intact; stale staging
  folders are removed by the next train, except by `--resume`, which continues the
  interrupted run in its own staging folder from its latest complete checkpoint.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from dlm.atomic import atomic_write_json, atomic_write_text, fsync_dir
from dlm.errors import StoreError
from dlm.paths import store_root

_VERSION = re.compile(r"^v(\d{4,})$")
MANIFEST_VERSION = 1


@dataclass(frozen=True)
class Store:
    """The store of one document. `root` may not exist yet (created on first train)."""

    dlm_id: str
    root: Path

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def lock_path(self) -> Path:
        return self.root / "dlm.lock"

    @property
    def metrics_path(self) -> Path:
        return self.root / "metrics.sqlite"

    @property
    def heldout_base_path(self) -> Path:
        return self.root / "heldout-base.json"

    @property
    def judge_base_path(self) -> Path:
        return self.root / "judge-base.json"

    @property
    def judge_reports_dir(self) -> Path:
        return self.root / "judge-reports"

    @property
    def cache_state_dir(self) -> Path:
        return self.root / "tokenized-cache"

    def sibling_cache_state_dirs(self) -> list[Path]:
        """The `tokenized-cache/` folders of the other documents in this `DLM_HOME`,
        sorted (their stat snapshots can start this document's first walk)."""
        if not self.root.parent.is_dir():
            return []
        return sorted(
            p / "tokenized-cache"
            for p in self.root.parent.iterdir()
            if p != self.root and (p / "tokenized-cache").is_dir()
        )

    @property
    def adapter_root(self) -> Path:
        return self.root / "adapter"

    def exists(self) -> bool:
        return self.root.is_dir()

    @contextmanager
    def train_lock(self) -> Iterator[None]:
        """Hold the store's writer lock for the block.

        Raises:
            StoreError: another `dlm train` holds it, or the store cannot be written.
        """
        lock = FileLock(str(self.root / "train.lock"), timeout=0)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            lock.acquire()
        except Timeout:
            raise StoreError(
                f"{self.root}: another `dlm train` is running on this document; wait for it to finish, then run again"
            ) from None
        except OSError as exc:
            raise StoreError(
                f"{self.root}: cannot write the document's store ({exc.strerror or exc}); make DLM_HOME "
                "writable or point DLM_HOME elsewhere"
            ) from None
        try:
            yield
        finally:
            lock.release()

    def versions(self) -> list[str]:
        """Adapter versions on disk, oldest first (`["v0001", "v0002"]`)."""
        folder = self.adapter_root / "versions"
        if not folder.is_dir():
            return []
        return sorted(p.name for p in folder.iterdir() if _VERSION.match(p.name))

    def current_version(self) -> str | None:
        """The version `current` points at, or None before the first train."""
        pointer = self.adapter_root / "current"
        try:
            name = pointer.read_text().strip()
        except FileNotFoundError:
            return None
        if not _VERSION.match(name) or not (self.adapter_root / "versions" / name).is_dir():
            raise StoreError(
                f"{pointer}: points at {name!r}, which is not an adapter version here; "
                f"write one of {self.versions() or 'no versions'} into it, or retrain"
            )
        return name

    def current_adapter_dir(self) -> Path | None:
        """Folder of the current adapter, or None before the first train."""
        version = self.current_version()
        return None if version is None else self.adapter_root / "versions" / version

    def new_staging_dir(self, run_id: str) -> Path:
        """A fresh folder to write an adapter into; removes stale staging folders."""
        self.adapter_root.mkdir(parents=True, exist_ok=True)
        for stale in self.adapter_root.glob(".staging-*"):
            shutil.rmtree(stale, ignore_errors=True)
        staging = self.adapter_root / f".staging-{run_id}"
        staging.mkdir()
        return staging

    def staging_dirs(self) -> list[Path]:
        """The staging folders present (at most one after any train), sorted."""
        if not self.adapter_root.is_dir():
            return []
        return sorted(self.adapter_root.glob(".staging-*"))

    def resume_staging_dir(self, run_id: str) -> Path:
        """The staging folder of interrupted run `run_id`, emptied of everything but its
        `checkpoints/`; every other staging folder is removed."""
        keep = self.adapter_root / f".staging-{run_id}"
        for stale in self.staging_dirs():
            if stale != keep:
                shutil.rmtree(stale, ignore_errors=True)
        keep.mkdir(parents=True, exist_ok=True)
        for path in keep.iterdir():
            if path.name != "checkpoints":
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink()
        return keep

    def commit_version(self, staging: Path) -> tuple[str, Path]:
        """Publish a complete adapter folder as the next version and make it current.

        Returns:
            (version name, its folder).
        """
        versions_dir = self.adapter_root / "versions"
        versions_dir.mkdir(parents=True, exist_ok=True)
        existing = self.versions()
        number = int(existing[-1][1:]) + 1 if existing else 1
        name = f"v{number:04d}"
        dest = versions_dir / name
        for path in staging.iterdir():  # make the files durable before the rename
            if path.is_file():
                with open(path, "rb") as fh:
                    os.fsync(fh.fileno())
        os.replace(staging, dest)
        fsync_dir(versions_dir)
        atomic_write_text(self.adapter_root / "current", name + "\n")
        return name, dest

    def read_manifest(self) -> dict[str, Any]:
        """The manifest, or a fresh one when none exists yet.

        Raises:
            StoreError: the manifest is not valid JSON or belongs to another document.
        """
        import json

        try:
            data = json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            return {"manifest_version": MANIFEST_VERSION, "dlm_id": self.dlm_id, "adapters": []}
        except ValueError as exc:
            raise StoreError(
                f"{self.manifest_path}: not valid JSON ({exc}); restore it or delete it "
                f"to start the history afresh (adapters stay on disk)"
            ) from None
        if data.get("dlm_id") != self.dlm_id:
            raise StoreError(f"{self.manifest_path}: belongs to dlm_id {data.get('dlm_id')!r}, not {self.dlm_id!r}")
        return data

    def record_adapter(
        self,
        *,
        version: str,
        run_id: str,
        adapter_sha256: str,
        base_model: str,
        base_model_revision: str,
        document_path: Path | None,
    ) -> None:
        """Add a published adapter version to the manifest and make it the current one.

        Called after `commit_version`; the manifest's schema is the store's alone
        (module docstring). `created_at` is UTC, to the second.
        """
        from datetime import datetime, timezone

        manifest = self.read_manifest()
        manifest.update(
            dlm_id=self.dlm_id,
            document_path=str(document_path.resolve()) if document_path else None,
            base_model={"name": base_model, "revision": base_model_revision},
            current_version=version,
        )
        manifest.setdefault("adapters", []).append(
            {
                "version": version,
                "run_id": run_id,
                "adapter_sha256": adapter_sha256,
                "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
        )
        self.write_manifest(manifest)

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        atomic_write_json(self.manifest_path, manifest)


def open_store(dlm_id: str) -> Store:
    """The store of document `dlm_id` under `$DLM_HOME/store/` (not created here)."""
    return Store(dlm_id=dlm_id, root=store_root() / dlm_id)

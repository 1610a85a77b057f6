"""Where `dlm` keeps its state.

$DLM_HOME/                 default ~/.dlm
    models/<alias>/        materialized base models (override: $DLM_MODELS_DIR)
    store/<dlm_id>/        one store per document (see dlm.store)
    cache/                 the section store shared by every document (dlm.cache;
                           override: $DLM_CACHE_DIR, so several homes can share one)
    export-locks/          one empty lock file per export folder (dlm.export.publish)
    teacher/               the teacher model's replies (dlm.rows.teacherstore)
    tokenizer-fingerprints.json, chat-renders/
                           what a warm run needs of a tokenizer without loading it
                           (dlm.tokenize.deferred)
"""

from __future__ import annotations

import os
from pathlib import Path


def dlm_home() -> Path:
    """`$DLM_HOME`, else `~/.dlm`. Not created here."""
    env = os.environ.get("DLM_HOME")
    return Path(env).expanduser() if env else Path.home() / ".dlm"


def models_dir() -> Path:
    """Folder of materialized base models: `$DLM_MODELS_DIR`, else `$DLM_HOME/models`."""
    env = os.environ.get("DLM_MODELS_DIR")
    return Path(env).expanduser() if env else dlm_home() / "models"


def store_root() -> Path:
    """Folder holding every document's store: `$DLM_HOME/store`."""
    return dlm_home() / "store"


def cache_store_dir() -> Path:
    """The tokenized-section store shared by documents: `$DLM_CACHE_DIR`, else `$DLM_HOME/cache`."""
    env = os.environ.get("DLM_CACHE_DIR")
    return Path(env).expanduser() if env else dlm_home() / "cache"


def teacher_dir() -> Path:
    """The teacher model's remembered replies: `$DLM_HOME/teacher` (`dlm.rows.teacherstore`)."""
    return dlm_home() / "teacher"

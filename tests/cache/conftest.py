from __future__ import annotations

from pathlib import Path

import pytest
from cachehelp import make_tree


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "src"
    make_tree(root, 40)
    return root


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    return tmp_path / "store" / "tokenized-cache"

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


@pytest.fixture(scope="session")
def s3_endpoint():
    """A real S3-compatible server (moto's server mode) on 127.0.0.1 for the session;
    s3fs reaches it through the standard AWS environment variables."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh bucket on the session's S3 server; returns its s3:// URL."""
    import uuid

    import s3fs

    for name, value in (
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
        ("AWS_ENDPOINT_URL", s3_endpoint),
    ):
        monkeypatch.setenv(name, value)
    bucket = f"dlm-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(skip_instance_cache=True).mkdir(bucket)
    return f"s3://{bucket}/cache"


@pytest.fixture(params=["dir", "s3"])
def remote_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each remote kind: a directory on a second folder, and the S3 server."""
    if request.param == "dir":
        return str(tmp_path / "remote-folder")
    return request.getfixturevalue("s3_bucket")

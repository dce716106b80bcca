"""Fixtures shared by test packages: moto's EC2 API server on loopback.

Started once per session, and only if a test asks for it; each test that uses it resets it
first, so tests see a fresh account.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from nodepool_operator.cloud import MotoServer


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    log = Path(tmp_path_factory.mktemp("moto")) / "moto.log"
    with MotoServer(log=log) as server:
        yield server


@pytest.fixture
def moto(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """A fresh moto account, with the standard chain's variables pointing at it."""
    moto_server.reset()
    for key, value in moto_server.env().items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_PROFILE", "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(key, raising=False)
    assert os.environ["AWS_ACCESS_KEY_ID"] == "testing"
    return moto_server

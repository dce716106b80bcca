"""A user's project with no pytest-asyncio settings at all (its default, strict mode): an
`async def` test that asks for kubeloop's fixtures runs on asyncio, and pytest prints no
notice about settings the user never chose. Run as a user runs it: pytest in a
subprocess, in a directory of its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

USER_TEST = """
from kubeloop import NAMESPACES


async def test_the_fixtures_work(kube_client, kube_namespace):
    ns = await kube_client.get(NAMESPACES, kube_namespace)
    assert ns["metadata"]["name"] == kube_namespace
"""


def test_async_tests_with_kubeloop_fixtures_need_no_asyncio_settings(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the rootdir, and nothing set
    (tmp_path / "test_user.py").write_text(USER_TEST)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed in " in out
    assert "asyncio_default_fixture_loop_scope" not in out
    assert "warning" not in out.lower()

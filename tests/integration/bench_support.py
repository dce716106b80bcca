"""Running ``bench/run.py`` from a smoke test, as a user would (shared by the bench smoke tests)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_quick(
    kubeconfig: Path,
    docs: Path,
    *args: str,
    timeout: float,
    env: Mapping[str, str] | None = None,
    progress: list[str] | None = None,
) -> dict[str, Any]:
    """Run ``bench/run.py --quick ARGS --kubeconfig K --write --docs DOCS``; its JSON line
    (and its progress lines, from stderr, into ``progress`` if given)."""
    proc = subprocess.run(
        [
            sys.executable,
            "bench/run.py",
            "--quick",
            *args,
            "--kubeconfig",
            str(kubeconfig),
            "--write",
            "--docs",
            str(docs),
        ],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    if progress is not None:
        progress.extend(proc.stderr.splitlines())
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stdout
    result: dict[str, Any] = lines[0]
    return result

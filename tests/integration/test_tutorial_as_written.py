"""docs/tutorial.md, run exactly as written, as a new user would.

The page's files (its code blocks with a ``title``) are written into an empty directory; a
fresh virtualenv gets only ``kubeloop[testing]``, from the wheel built from this tree; then
every ``$`` command of the page's console blocks runs in bash, in order, with that venv
first on PATH, and its output is compared with the lines the page shows under it (``...``
matches anything; an empty block checks only the exit status). Exported variables carry
from one command to the next, as in the reader's shell. Two steps cannot be typed
literally and are done the way they say: ``pip install "kubeloop[testing]"`` installs the
built wheel with that extra (this version is not on the package index yet), and the
command marked ``# keeps running`` runs in the background until the page says Ctrl-C (its
exit status and log are checked then).

The page's own control plane (``kubeloop envtest up --cluster``) is the reader's: started
and stopped by the page's commands, its state in a directory of this test's. The machinery
is tests/integration/console_pages.py, shared with the webhook chapter's test
(test_tutorial_webhooks_as_written.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.console_pages import (
    DOWN,
    INSTALL,
    blocks,
    reader_venv,
    run_page,
    typed_commands,
)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"


def test_the_page_has_its_code_inline_and_it_is_the_tested_code() -> None:
    page = PAGE.read_text()
    assert "--8<--" not in page  # an include shows as a marker on the repository host
    titled = {b.title: b.text for b in blocks(page) if b.title}
    assert set(titled) == {"greeting_crd.yaml", "greeting_operator.py", "test_greeting.py"}
    # the same files run by test_tutorial.py and test_distributions.py, kept identical
    for name, text in titled.items():
        assert text == (ROOT / "examples" / "tutorial" / name).read_text(), name
    typed = typed_commands(page)
    assert typed[0].line == INSTALL
    assert sum(c.background for c in typed) == 1
    assert "kubeloop envtest up --cluster" in typed[1].line  # the GC step needs it


@pytest.mark.timeout(1800)
def test_the_tutorial_as_written(wheels: dict[str, Path], tmp_path: Path) -> None:
    page = PAGE.read_text()
    project = tmp_path / "greeting"
    project.mkdir()
    for block in blocks(page):
        if block.title:
            (project / block.title).write_text(block.text)
    # the venv the page's first command makes (installed up front: the package index does
    # not have this version)
    env = reader_venv(wheels["kubeloop"], tmp_path)
    done = run_page(page, project, env, on_install=lambda: None)
    # the page's whole story ran: install, cluster, CRD, operator, the kubectl session,
    # the user's pytest, and the cleanup
    assert done[0] == INSTALL
    assert any(line.startswith("pytest ") for line in done)
    assert done[-1] == DOWN

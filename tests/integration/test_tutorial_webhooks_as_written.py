"""docs/tutorial-webhooks.md (the tutorial's part 2), run exactly as written, as a reader
would after part 1: the directory holds part 1's greeting_crd.yaml and this page's files, a
fresh virtualenv has only ``kubeloop[testing]`` from the wheel built from this tree, and
every ``$`` command of the page runs in bash, its output compared with what the page shows
(tests/integration/console_pages.py). The page's program runs in the background as the
reader's first terminal; the real kube-apiserver calls it over HTTPS, so the tidied message
and the refusal the page shows are the apiserver's answers to kubectl. The page's own test
(test_greeting_webhooks.py) runs with the reader's pytest, as part 1's does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.console_pages import DOWN, blocks, reader_venv, run_page, typed_commands

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial-webhooks.md"
TUTORIAL = ROOT / "examples" / "tutorial"


def test_the_page_has_its_code_inline_and_it_is_the_tested_code() -> None:
    page = PAGE.read_text()
    assert "--8<--" not in page
    titled = {b.title: b.text for b in blocks(page) if b.title}
    assert set(titled) == {"greeting_webhooks.py", "test_greeting_webhooks.py"}
    for name, text in titled.items():
        assert text == (TUTORIAL / name).read_text(), name
    typed = typed_commands(page)
    assert sum(c.background for c in typed) == 1
    # what the page promises to show: a tidied message, and both kinds of refusal
    refusals = [c for c in typed if c.fails]
    assert [c.expected[0].split(":")[0] for c in refusals] == [
        "Error from server (Forbidden)",
        'The Greeting "blank" is invalid',
    ]
    assert 'admission webhook "validate.tutorial.kubeloop.dev" denied' in refusals[0].expected[0]
    # linked from part 1 and from the site's navigation
    assert "(tutorial-webhooks.md)" in (ROOT / "docs" / "tutorial.md").read_text()
    assert "tutorial-webhooks.md" in (ROOT / "mkdocs.yml").read_text()


@pytest.mark.timeout(1800)
def test_the_webhook_chapter_as_written(wheels: dict[str, Path], tmp_path: Path) -> None:
    page = PAGE.read_text()
    project = tmp_path / "greeting"
    project.mkdir()
    # where part 1 left the reader: its CRD in the directory, kubeloop[testing] installed
    (project / "greeting_crd.yaml").write_text((TUTORIAL / "greeting_crd.yaml").read_text())
    for block in blocks(page):
        if block.title:
            (project / block.title).write_text(block.text)
    env = reader_venv(wheels["kubeloop"], tmp_path)
    done = run_page(page, project, env)
    assert any(line.startswith("python greeting_webhooks.py") for line in done)
    assert sum("kubectl apply -f - <<" in line for line in done) == 3
    assert "pytest -q test_greeting_webhooks.py" in done
    assert done[-1] == DOWN
    # the program's log: the apiserver called it, and it stopped cleanly on Ctrl-C
    log = (tmp_path / "background-0.log").read_text()
    assert "webhook /validate denied CREATE greetings default/hello-again" in log
    assert "Traceback" not in log

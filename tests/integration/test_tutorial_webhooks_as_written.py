"""docs/tutorial-webhooks.md (the tutorial's part 2), run exactly as written, as a reader
would after part 1: the directory holds part 1's greeting_crd.yaml and this page's files, a
fresh virtualenv has only ``kubeloop[testing]`` from the wheel built from this tree, and
every ``$`` command of the page runs in bash, its output compared with what the page shows
(tests/integration/console_pages.py). The page's two programs (the admission webhooks, then
the conversion of Greeting v2) run in the background as the reader's first and third
terminals; the real kube-apiserver calls them over HTTPS, so the tidied message, the
refusals and the Greetings read in the other version are the apiserver's answers to
kubectl. The page's own tests run with the reader's pytest, as part 1's does.
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
    assert set(titled) == {
        "greeting_webhooks.py",
        "test_greeting_webhooks.py",
        "greeting_versions.py",
        "test_greeting_versions.py",
    }
    for name, text in titled.items():
        assert text == (TUTORIAL / name).read_text(), name
    typed = typed_commands(page)
    assert sum(c.background for c in typed) == 2
    # what the page promises to show: a tidied message, both kinds of refusal, and the
    # refusal of a duplicate written as v2 (converted to v1 for the admission webhooks)
    refusals = [c for c in typed if c.fails]
    assert [c.expected[0].split(":")[0] for c in refusals] == [
        "Error from server (Forbidden)",
        'The Greeting "blank" is invalid',
        "Error from server (Forbidden)",
    ]
    for refused in (refusals[0], refusals[2]):
        assert 'webhook "validate.tutorial.kubeloop.dev" denied' in refused.expected[0]
    assert "apiVersion: tutorial.kubeloop.dev/v2" in refusals[2].line
    # the round trip: created as v1 read as v2; created as v2 read as v1 and as v2
    shown = [c.expected[0] for c in typed if "-o jsonpath='{.apiVersion} {.spec}'" in c.line]
    assert shown == [
        'tutorial.kubeloop.dev/v2 {"message":"Hello, kubeloop","suspend":false}',
        'tutorial.kubeloop.dev/v1 {"enabled":false,"message":"Not now"}',
        'tutorial.kubeloop.dev/v2 {"message":"Not now","suspend":true}',
    ]
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
    assert [line.split()[1] for line in done if line.startswith("python ")] == [
        "greeting_webhooks.py",
        "greeting_versions.py",
    ]
    assert sum("kubectl apply -f - <<" in line for line in done) == 5
    assert "pytest -q test_greeting_webhooks.py" in done
    assert "pytest -q test_greeting_versions.py" in done
    assert done[-2:] == ["kubectl replace -f greeting_crd.yaml", DOWN]
    # the programs' logs: the apiserver called them, and they stopped cleanly on Ctrl-C
    log = (tmp_path / "background-0.log").read_text()
    assert "webhook /validate denied CREATE greetings default/hello-again" in log
    assert "webhook /validate denied CREATE greetings default/hello-v2" in log
    versions_log = (tmp_path / "background-1.log").read_text()
    assert "listening on 127.0.0.1:9444" in versions_log
    for text in (log, versions_log):
        assert "Traceback" not in text

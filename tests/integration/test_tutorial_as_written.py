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
and stopped by the page's commands, its state in a directory of this test's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests._dist import uv

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"
INSTALL = 'pip install "kubeloop[testing]"'
BACKGROUND = "# keeps running"


@dataclass(frozen=True)
class Block:
    lang: str
    title: str | None
    text: str


@dataclass(frozen=True)
class Command:
    line: str  # what the reader types, here-document included
    expected: tuple[str, ...]  # the output the page shows

    @property
    def background(self) -> bool:
        return BACKGROUND in self.line.splitlines()[0]

    @property
    def fails(self) -> bool:
        """The page shows an error: the command is meant to exit non-zero."""
        return any(re.match(r"(Error from server|The .* is invalid)", e) for e in self.expected)


FENCE = re.compile(r'^```(\w+)(?: title="([^"]+)")?\n(.*?)^```$', re.S | re.M)


def blocks(page: str) -> list[Block]:
    return [Block(m[1], m[2], m[3]) for m in FENCE.finditer(page)]


def commands(console: str) -> list[Command]:
    lines, out, i = console.splitlines(), [], 0
    while i < len(lines):
        assert lines[i].startswith("$ "), f"console output with no command: {lines[i]!r}"
        typed = [lines[i][2:]]
        i += 1
        heredoc = re.search(r"<<'?(\w+)'?", typed[0])
        if heredoc:
            while lines[i] != heredoc[1]:
                typed.append(lines[i])
                i += 1
            typed.append(lines[i])
            i += 1
        shown = []
        while i < len(lines) and not lines[i].startswith("$ "):
            shown.append(lines[i])
            i += 1
        out.append(Command("\n".join(typed), tuple(s for s in shown if s.strip())))
    return out


def shows(expected: tuple[str, ...], output: str) -> bool:
    """Each shown line matches a line of ``output``, in order (whitespace runs alike)."""
    actual = [" ".join(line.split()) for line in output.splitlines()]
    at = 0
    for line in expected:
        words = [re.escape(w) for w in line.split()]
        pattern = re.compile(r"\s".join(words).replace(re.escape("..."), ".*"))
        while at < len(actual) and not pattern.fullmatch(actual[at]):
            at += 1
        if at == len(actual):
            return False
        at += 1
    return True


def test_the_page_has_its_code_inline_and_it_is_the_tested_code() -> None:
    page = PAGE.read_text()
    assert "--8<--" not in page  # an include shows as a marker on the repository host
    titled = {b.title: b.text for b in blocks(page) if b.title}
    assert set(titled) == {"greeting_crd.yaml", "greeting_operator.py", "test_greeting.py"}
    # the same files run by test_tutorial.py and test_distributions.py, kept identical
    for name, text in titled.items():
        assert text == (ROOT / "examples" / "tutorial" / name).read_text(), name
    typed = [c for b in blocks(page) if b.lang == "console" for c in commands(b.text)]
    assert typed[0].line == INSTALL
    assert sum(c.background for c in typed) == 1
    assert "kubeloop envtest up --cluster" in typed[1].line  # the GC step needs it


class Shell:
    """The reader's shell: each command runs in bash with the variables the previous ones
    exported."""

    def __init__(self, cwd: Path, env: dict[str, str], state: Path) -> None:
        self.cwd, self.env, self.state = cwd, env, state
        state.write_text("")
        self.background: list[tuple[str, subprocess.Popen[bytes], Path]] = []

    def run(self, line: str) -> subprocess.CompletedProcess[str]:
        script = f"source {self.state}\n{line}\nrc=$?\nexport -p > {self.state}\nexit $rc\n"
        return subprocess.run(
            ["bash", "-c", script],
            cwd=self.cwd,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=900,
        )

    def start(self, line: str) -> None:
        log = self.cwd.parent / f"background-{len(self.background)}.log"
        proc = subprocess.Popen(
            ["bash", "-c", f"source {self.state}\nexec {line}"],
            cwd=self.cwd,
            env=self.env,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )
        self.background.append((line, proc, log))

    def interrupt_all(self) -> None:
        """Ctrl-C in each background terminal; each must stop cleanly."""
        for line, proc, log in self.background:
            proc.send_signal(signal.SIGINT)
            code = proc.wait(timeout=60)
            text = log.read_text(errors="replace")
            assert code == 0, f"{line}: exit {code}\n{text[-3000:]}"
            assert "Traceback" not in text, text[-3000:]
        self.background.clear()

    def kill_all(self) -> None:
        for _, proc, _ in self.background:
            proc.kill()
            proc.wait()


@pytest.mark.timeout(1800)
def test_the_tutorial_as_written(wheels: dict[str, Path], tmp_path: Path) -> None:
    page = PAGE.read_text()
    project = tmp_path / "greeting"
    project.mkdir()
    for block in blocks(page):
        if block.title:
            (project / block.title).write_text(block.text)

    venv = tmp_path / "venv"
    subprocess.run(
        [uv(), "venv", "--python", sys.executable, str(venv)], check=True, capture_output=True
    )
    dev_bin = str(ROOT / ".venv" / "bin")
    path = [str(venv / "bin")] + [
        d for d in os.environ["PATH"].split(os.pathsep) if d and d != dev_bin
    ]
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "KUBECONFIG", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env |= {
        "PATH": os.pathsep.join(path),
        "VIRTUAL_ENV": str(venv),
        "XDG_STATE_HOME": str(tmp_path / "state"),  # where `envtest up` keeps its cluster
    }
    shell = Shell(project, env, tmp_path / "shell-state.sh")
    done: list[str] = []
    try:
        for block in blocks(page):
            if block.lang != "console":
                continue
            for command in commands(block.text):
                if command.line == INSTALL:
                    wheel = wheels["kubeloop"]
                    subprocess.run(
                        [
                            uv(),
                            "pip",
                            "install",
                            "--python",
                            str(venv / "bin" / "python"),
                            f"kubeloop[testing] @ {wheel.as_uri()}",
                        ],
                        check=True,
                        capture_output=True,
                        timeout=900,
                    )
                    done.append(command.line)
                    continue
                if command.background:
                    shell.start(command.line)
                    done.append(command.line)
                    continue
                if "envtest down" in command.line:
                    shell.interrupt_all()  # the page: "Ctrl-C in the first terminal"
                result = shell.run(command.line)
                output = result.stdout + result.stderr
                where = f"$ {command.line}\n(exit {result.returncode})\n{output[-4000:]}"
                assert (result.returncode != 0) == command.fails, where
                assert shows(command.expected, output), f"expected {command.expected}\n{where}"
                done.append(command.line)
    finally:
        shell.kill_all()
        if not any("envtest down" in line for line in done):
            shell.run("kubeloop envtest down")
    # the page's whole story ran: install, cluster, CRD, operator, the kubectl session,
    # the user's pytest, and the cleanup
    assert done[0] == INSTALL
    assert any(line.startswith("pytest ") for line in done)
    assert done[-1] == "kubeloop envtest down"

"""Running a documentation page as written: its titled code blocks are files, its console
blocks are commands typed into the reader's shell, in order, their output compared with the
lines the page shows under them (``...`` matches anything; an empty block checks only the
exit status). Exported variables carry from one command to the next, as in the reader's
shell. The tutorial's pages (docs/tutorial.md, docs/tutorial-webhooks.md) are run this way.

Conventions the pages follow: a command whose first line has ``# keeps running`` runs in the
background (a second terminal) until the page runs ``kubeloop envtest down``, which is the
reader's Ctrl-C in that terminal (its exit status and log are checked then); a command whose
output shows an error (``Error from server``, ``The ... is invalid``) must exit non-zero.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests._dist import uv

INSTALL = 'pip install "kubeloop[testing]"'
BACKGROUND = "# keeps running"
DOWN = "kubeloop envtest down"


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


def typed_commands(page: str) -> list[Command]:
    return [c for b in blocks(page) if b.lang == "console" for c in commands(b.text)]


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


def reader_venv(wheel: Path, tmp_path: Path) -> dict[str, str]:
    """A fresh virtualenv with only ``kubeloop[testing]`` from ``wheel`` (what the page's
    ``pip install "kubeloop[testing]"`` gives a reader), and the environment of a shell with
    it first on PATH and its own place for ``kubeloop envtest up``'s cluster."""
    venv = tmp_path / "venv"
    subprocess.run(
        [uv(), "venv", "--python", sys.executable, str(venv)], check=True, capture_output=True
    )
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
    dev_bin = str(Path(__file__).resolve().parents[2] / ".venv" / "bin")
    path = [str(venv / "bin")] + [
        d for d in os.environ["PATH"].split(os.pathsep) if d and d != dev_bin
    ]
    drop = ("VIRTUAL_ENV", "PYTHONPATH", "KUBECONFIG", "PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return env | {
        "PATH": os.pathsep.join(path),
        "VIRTUAL_ENV": str(venv),
        "XDG_STATE_HOME": str(tmp_path / "state"),  # where `envtest up` keeps its cluster
    }


def run_page(
    page: str, project: Path, env: dict[str, str], on_install: Callable[[], None] | None = None
) -> list[str]:
    """Type every command of ``page``'s console blocks in ``project``; returns the commands
    run. ``on_install`` stands for the page's ``pip install`` line (the version is not on the
    package index)."""
    shell = Shell(project, env, project.parent / "shell-state.sh")
    done: list[str] = []
    try:
        for command in typed_commands(page):
            if command.line == INSTALL:
                assert on_install is not None, "the page installs kubeloop"
                on_install()
                done.append(command.line)
                continue
            if command.background:
                shell.start(command.line)
                done.append(command.line)
                continue
            if DOWN in command.line:
                shell.interrupt_all()  # the page: "Ctrl-C in the first terminal"
            result = shell.run(command.line)
            output = result.stdout + result.stderr
            where = f"$ {command.line}\n(exit {result.returncode})\n{output[-4000:]}"
            assert (result.returncode != 0) == command.fails, where
            assert shows(command.expected, output), f"expected {command.expected}\n{where}"
            done.append(command.line)
    finally:
        shell.kill_all()
        if not any(DOWN in line for line in done):
            shell.run(DOWN)
    return done

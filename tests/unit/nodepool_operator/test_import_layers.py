"""The operator's import layers hold: the contracts of ``.importlinter``, and what a run really
loads.

import-linter reads the source; the subprocess checks here read ``sys.modules`` of a fresh
interpreter after ``nodepool-operator`` has parsed and run ``run --cloud aws``, so a lazy
import on that path would show up too. The installed-wheel version of this (no extras at all)
is ``tests/e2e/test_wheels_alone.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
#: What only the extras bring, and the operator's own test bed and demo runner.
FORBIDDEN = (
    "kubeloop.envtest",
    "kubeloop.testing",
    "matplotlib",
    "moto",
    "pytest",
    "cryptography",
    "nodepool_operator.testbed",
    "nodepool_operator.demo._driver",
)


def _python(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


def _lint(pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` over ``.importlinter``; ``pythonpath`` goes before the installed
    packages (a copy of one is checked in their place)."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-logo", "--no-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
        env=env,
    )


def test_the_import_contracts_hold() -> None:
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert " 0 broken" in result.stdout


#: A bad import for each contract: (module, the line, the start of the contract's name).
BAD_IMPORTS = [
    (
        "cloud/_port.py",
        "from nodepool_operator import operator",
        "The operator's layers: the command over the demo",
    ),
    (
        "operator.py",
        "import matplotlib",
        "The product (everything `run --cloud aws` loads) imports no test bed",
    ),
    (
        "__main__.py",
        "from kubeloop import envtest",
        "The command reaches the demo's and the test bed's needs only through them",
    ),
    (
        "settings.py",
        "from kubeloop import _store",
        "Nothing outside a package imports its _private modules",
    ),
    (
        "controllers/autoscaler/_scale.py",
        "from nodepool_operator.controllers.nodepool import _budget",
        "The operator's controllers import no _private module of another package (issue 20)",
    ),
    (
        "controllers/nodepool/_plan.py",
        "from nodepool_operator.controllers.autoscaler import _texts",
        "The operator's controllers import no _private module of another package (issue 20)",
    ),
    (
        "controllers/_scope.py",
        "from nodepool_operator.scheduling import _pods",
        "The operator's controllers import no _private module of another package (issue 20)",
    ),
    (
        "scheduling/_slots.py",
        "from nodepool_operator.controllers import POOL_LABEL",
        "scheduling never imports controllers (issue 20)",
    ),
]


@pytest.mark.parametrize(("module", "line", "contract"), BAD_IMPORTS, ids=lambda v: str(v)[:40])
def test_each_contract_breaks_on_a_bad_import(
    module: str, line: str, contract: str, tmp_path: Path
) -> None:
    """The same contracts over a copy of the package with one bad import added: named
    broken (a contract that cannot fail checks nothing)."""
    source = ROOT / "packages" / "nodepool-operator" / "src" / "nodepool_operator"
    copy = tmp_path / "nodepool_operator"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("__pycache__"))
    with (copy / module).open("a") as f:
        f.write(f"\n{line}  # noqa\n")
    result = _lint(pythonpath=tmp_path)
    assert result.returncode != 0, result.stdout
    out = " ".join(result.stdout.split())  # the report wraps long names
    # named under "Broken contracts", where only the broken ones are listed
    assert contract in out.partition("Broken contracts")[2], out[-3000:]


_LOADED_AFTER = """
import json, sys
from nodepool_operator.__main__ import main
codes = []
for argv in (["--help"], ["run", "--help"], ["run", "--cloud", "aws", "--help"]):
    try:
        main(argv)
    except SystemExit as exit:
        codes.append(exit.code)
# past parsing: the run itself, up to loading the (missing) kubeconfig
codes.append(main(["run", "--cloud", "aws", "--kubeconfig", sys.argv[1]]))
print(json.dumps({"codes": codes, "modules": sorted(sys.modules)}))
"""


def test_run_cloud_aws_loads_no_test_bed_demo_or_extra(tmp_path: Path) -> None:
    result = _python(_LOADED_AFTER, str(tmp_path / "no-such-kubeconfig"))
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["codes"] == [0, 0, 0, 1]  # three helps, then "cannot connect"
    loaded = [m for m in out["modules"] if m.startswith(FORBIDDEN)]
    assert loaded == []
    assert "nodepool_operator.operator" in out["modules"]  # the check looked at a real run


# A missing extra, as in a venv without it: its top-level modules cannot be imported
# (a None in sys.modules, which find_spec also reports as not installed).
_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from nodepool_operator.__main__ import main
sys.exit(main(sys.argv[2:]))
"""
NO_EXTRAS = "cryptography,matplotlib,moto"


@pytest.mark.parametrize(
    ("missing", "argv", "mentions", "extra"),
    [
        (NO_EXTRAS, ["demo", "--headless"], "nodepool-operator demo", "demo"),
        (NO_EXTRAS, ["run", "--cloud", "simulated"], "--no-simulated-kubelets", "demo"),
        ("moto", ["demo", "--cloud", "aws"], "demo --cloud aws", "aws-demo"),
    ],
    ids=["demo", "run-simulated", "demo-aws"],
)
def test_a_missing_extra_is_one_line_naming_it_and_exit_2(
    missing: str, argv: list[str], mentions: str, extra: str, tmp_path: Path
) -> None:
    argv = [*argv, "--kubeconfig", str(tmp_path / "never-read")]
    result = _python(_WITHOUT, missing, *argv)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert mentions in lines[0]
    assert f'pip install "nodepool-operator[{extra}]"' in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_run_simulated_without_its_kubelets_needs_no_extra(tmp_path: Path) -> None:
    argv = ["run", "--no-simulated-kubelets", "--kubeconfig", str(tmp_path / "missing")]
    result = _python(_WITHOUT, NO_EXTRAS, *argv)
    assert result.returncode == 1, result.stderr  # past the extras: "cannot connect"
    assert "cannot connect" in result.stderr
    assert "extra" not in result.stderr

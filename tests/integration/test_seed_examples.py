"""The three seed lessons, run as tests against the session's control plane.

Each example's ``run(...)`` coroutine is imported from ``examples/seeds`` and
called with the session kubeconfig; the assertions are about what the lesson
claims (overlaps, loop detection, reconcile counts, conflicts), not about how
long anything took.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from kubeloop.envtest import ControlPlane

pytestmark = pytest.mark.integration

SEEDS = Path(__file__).resolve().parents[2] / "examples" / "seeds"


def _seed(name: str) -> ModuleType:
    """Import ``examples/seeds/<name>.py`` (under a private module name).

    The examples import their shared ``_cluster`` helper as a top-level module,
    so their directory has to be importable too.
    """
    if str(SEEDS) not in sys.path:
        sys.path.insert(0, str(SEEDS))
    module_name = f"kubeloop_seed_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, SEEDS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def kubeconfig(kube_control_plane: ControlPlane) -> str:
    return str(kube_control_plane.kubeconfig)


# -- workers.py: max_concurrent_reconciles ---------------------------------------------


async def test_workers_one_worker_reconciles_one_object_at_a_time(kubeconfig: str) -> None:
    result = await _seed("workers").run(kubeconfig, objects=3, delay=0.2, workers=1)
    assert result["objects"] == 3
    assert result["max_overlap"] == 1


async def test_workers_more_workers_than_objects_reconcile_all_at_once(kubeconfig: str) -> None:
    result = await _seed("workers").run(kubeconfig, objects=5, delay=1.0, workers=10)
    # every object in flight together; never more than there are objects
    assert result["max_overlap"] == 5


# -- drift.py: the loop trap and its cure ----------------------------------------------


async def test_drift_without_predicate_loops_and_is_detected(kubeconfig: str) -> None:
    # The requeue is an hour away, so after the start-up reconcile and the one spec change
    # nothing but the reconciler's own status writes can trigger another run.
    spec_changes = 1
    result = await _seed("drift").run(
        kubeconfig, predicate="none", seconds=4.0, requeue_after=3600.0, spec_changes=spec_changes
    )
    assert result["loop_detected"] is True
    log = result["reconcile_log"]
    # every run writes, but one a spec change superseded (StaleGeneration, where reported)
    superseded = result.get("superseded", 0)
    assert len(log) == result["reconciles"] == result["status_writes"] + superseded
    self_triggered = len(log) - (1 + spec_changes + superseded)
    assert self_triggered > 0, log


async def test_drift_with_generation_predicate_reconciles_on_schedule(kubeconfig: str) -> None:
    requeue_after, spec_changes = 1.0, 2
    result = await _seed("drift").run(
        kubeconfig,
        predicate="generation",
        seconds=5.0,
        requeue_after=requeue_after,
        spec_changes=spec_changes,
    )
    assert result["loop_detected"] is False
    log: list[tuple[float, int]] = result["reconcile_log"]
    superseded = result.get("superseded", 0)  # retried at once: a cause of its own
    assert len(log) == result["reconciles"] == result["status_writes"] + superseded
    generations = [gen for _, gen in log]
    # every spec change reconciled, in order
    assert generations == sorted(generations)
    assert sorted(set(generations)) == list(range(1, spec_changes + 2))
    # Every reconcile has a cause other than its own status write: the requeue timer an
    # earlier reconcile set, or one of the 1 + spec_changes watch events of a new
    # generation (the Added and each spec change).
    assert _not_explained_by_a_timer(log, requeue_after) <= 1 + spec_changes + superseded, log


def _not_explained_by_a_timer(log: list[tuple[float, int]], requeue_after: float) -> int:
    """Reconciles in ``log`` that no earlier reconcile's requeue timer can account for.

    Each reconcile sets one timer (``requeue_after`` from its start at the earliest) and
    each timer triggers at most one run; a run takes the earliest timer due by then.
    asyncio may fire a timer up to its clock resolution early, hence the slack.
    """
    due: list[float] = []
    unexplained = 0
    for at, _ in log:
        ready = [t for t in due if t <= at + 0.05]
        if ready:
            due.remove(min(ready))
        else:
            unexplained += 1
        due.append(at + requeue_after)
    return unexplained


# -- conflict.py: 409 is normal --------------------------------------------------------


async def test_conflict_is_resolved_without_redoing_work_or_losing_updates(
    kubeconfig: str,
) -> None:
    result = await _seed("conflict").run(kubeconfig)
    assert result["conflicts"] >= 1
    assert result["expensive_runs"] == 1
    assert result["lost_updates"] == 0

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
    seconds, requeue_after = 4.0, 2.0
    result = await _seed("drift").run(
        kubeconfig, predicate="none", seconds=seconds, requeue_after=requeue_after, spec_changes=1
    )
    assert result["loop_detected"] is True
    # the status write re-triggers the reconcile: far more runs than the requeue asks for
    assert isinstance(result["reconciles"], int)
    assert result["reconciles"] > 20 > seconds / requeue_after
    # every run writes, but one that the spec change superseded (StaleGeneration)
    assert result["status_writes"] + result["superseded"] == result["reconciles"]
    assert result["superseded"] in (0, 1)


async def test_drift_with_generation_predicate_reconciles_on_schedule(kubeconfig: str) -> None:
    seconds, requeue_after = 6.0, 2.0
    result = await _seed("drift").run(
        kubeconfig,
        predicate="generation",
        seconds=seconds,
        requeue_after=requeue_after,
        spec_changes=1,
    )
    assert result["loop_detected"] is False
    reconciles = result["reconciles"]
    assert isinstance(reconciles, int)
    # one per requeue period, plus the start-up reconcile and the one spec change
    assert seconds / requeue_after <= reconciles <= seconds / requeue_after + 3


# -- conflict.py: 409 is normal --------------------------------------------------------


async def test_conflict_is_resolved_without_redoing_work_or_losing_updates(
    kubeconfig: str,
) -> None:
    result = await _seed("conflict").run(kubeconfig)
    assert result["conflicts"] >= 1
    assert result["expensive_runs"] == 1
    assert result["lost_updates"] == 0

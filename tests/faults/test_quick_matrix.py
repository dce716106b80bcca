"""The quick fault matrix (``make test``): every fault kind against all three operators,
run as OS processes behind the fault proxy, the two-instance and partitioned-leader
scenarios included. The full matrix is ``make faults`` (tests/faults/runner.py).

Each scenario is judged by its oracles (apiserver state, the proxy's log, the cloud's
records; see the runner's docstring); a failure prints what differed and the operators'
last log lines.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kubeloop.envtest import ControlPlane
from tests.faults.runner import References, run_scenario
from tests.faults.scenarios import Scenario, quick
from tests.faults.world import World, world

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

#: Fault-free reference runs, shared by the scenarios of this session (plain data).
REFERENCES: References = {}


@pytest.fixture
async def matrix(kube_cluster: ControlPlane) -> AsyncIterator[World]:
    async with world(kube_cluster) as w:
        yield w


@pytest.mark.parametrize("scenario", quick(), ids=lambda s: s.id)
async def test_scenario_converges_and_loses_nothing(matrix: World, scenario: Scenario) -> None:
    outcome = await run_scenario(matrix, scenario, REFERENCES)
    assert outcome.clean, outcome.explain()

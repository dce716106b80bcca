"""Lease timings that would let a leader overlap its successor are refused up front."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop import Client, LeaderElectionOptions, Manager, ManagerOptions
from kubeloop._config import ClusterConfig


def test_controller_runtime_defaults_are_valid() -> None:
    opts = LeaderElectionOptions(name="x")
    assert (opts.lease_duration, opts.renew_deadline, opts.retry_period) == (15.0, 10.0, 2.0)


@pytest.mark.parametrize(
    ("timings", "field"),
    [
        ({"lease_duration": 10.0, "renew_deadline": 10.0}, "lease_duration"),
        ({"renew_deadline": 2.0, "retry_period": 2.0}, "renew_deadline"),
        ({"retry_period": 0.0}, "retry_period"),
    ],
)
def test_timings_that_break_the_no_overlap_rule_are_refused(
    timings: dict[str, Any], field: str
) -> None:
    with pytest.raises(ValueError, match=field):
        LeaderElectionOptions(name="x", **timings)


async def test_a_manager_with_bad_timings_fails_when_built_not_when_it_runs() -> None:
    async with Client(ClusterConfig(server="https://127.0.0.1:1")) as client:
        with pytest.raises(ValueError, match="lease_duration"):
            Manager(
                client, ManagerOptions(leader_election=True, lease_duration=5, renew_deadline=5)
            )

"""The nomination patch: what the Autoscaler would write to a pending pod's status."""

from __future__ import annotations

from typing import Any

import pytest

from nodepool_operator.scheduling import nomination_patch

NOMINATION_FIELD = "nominatedNodeName"


def pod(**fields: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "42"},
        "spec": {},
        "status": {"phase": "Pending"},
    }
    for where, value in fields.items():
        section, key = where.split("__")
        obj[section][key] = value
    return obj


def test_nominates_a_pending_pod_with_its_version_as_precondition() -> None:
    assert nomination_patch(pod(), "node-a") == {
        "status": {NOMINATION_FIELD: "node-a"},
        "metadata": {"resourceVersion": "42"},
    }


def test_moves_a_nomination_to_another_node() -> None:
    patch = nomination_patch(pod(status__nominatedNodeName="node-a"), "node-b")
    assert patch is not None
    assert patch["status"] == {NOMINATION_FIELD: "node-b"}


def test_nothing_to_write_when_already_nominated_so() -> None:
    assert nomination_patch(pod(status__nominatedNodeName="node-a"), "node-a") is None


def test_withdraws_a_nomination_with_none() -> None:
    patch = nomination_patch(pod(status__nominatedNodeName="node-a"), None)
    assert patch is not None
    assert patch["status"] == {NOMINATION_FIELD: None}  # null removes it in a merge patch
    assert nomination_patch(pod(), None) is None
    assert nomination_patch(pod(status__nominatedNodeName=""), None) is None


@pytest.mark.parametrize(
    "state",
    [{"spec__nodeName": "node-x"}, {"metadata__deletionTimestamp": "2026-01-01T00:00:00Z"}],
    ids=["bound", "deleting"],
)
def test_never_nominates_a_bound_or_deleting_pod(state: dict[str, Any]) -> None:
    assert nomination_patch(pod(**state), "node-a") is None


def test_no_precondition_without_a_version() -> None:
    obj = pod()
    del obj["metadata"]["resourceVersion"]
    assert nomination_patch(obj, "node-a") == {"status": {NOMINATION_FIELD: "node-a"}}


def test_a_pod_with_missing_sections_reads_as_pending() -> None:
    assert nomination_patch({}, "node-a") == {"status": {NOMINATION_FIELD: "node-a"}}


@pytest.mark.parametrize("name", ["", "Node-A", "node_a", "-a", "a-", "a" * 254, "a..b"])
def test_refuses_a_name_that_is_no_node_name(name: str) -> None:
    with pytest.raises(ValueError, match=r"status\.nominatedNodeName"):
        nomination_patch(pod(), name)


def test_accepts_dns_subdomain_names() -> None:
    for name in ("ip-10-0-0-1.ec2.internal", "a", "kwok-pool-0", "a" * 253):
        assert nomination_patch(pod(), name) is not None

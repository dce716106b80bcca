"""The demo's burst: what fits, the lower bound, and why no binding order needs a fourth node."""

from __future__ import annotations

import pytest

from nodepool_operator.api import parse_nodepool
from nodepool_operator.controllers._capacity import pool_template
from nodepool_operator.demo._workload import (
    DEFAULT_PODS,
    NOT_TRIGGERING,
    UNWATCHED_NAMESPACE,
    WATCHED_NAMESPACES,
    Role,
    Workload,
    mixed_burst,
    role_of,
)
from nodepool_operator.scheduling import FitReason, pod_fits_template, pod_requests

GI = 2**30


def test_default_burst_is_13_fitting_pods_and_4_that_must_not_trigger() -> None:
    workload = Workload()
    roles = list(workload.roles().values())
    assert len(workload.pods()) == DEFAULT_PODS == 17
    assert roles.count(Role.FITS) == 13
    assert sorted(r for r in roles if r is not Role.FITS) == sorted(
        [Role.TOO_BIG, Role.UNWATCHED, Role.NO_MATCHING_NODE, Role.MISSING_SECRET]
    )
    sizes = sorted(pod_requests(p).memory // GI for p in workload.fitting_pods())
    assert sizes == [4] * 4 + [12] * 3 + [28] * 6


def test_first_fit_decreasing_meets_the_lower_bound() -> None:
    workload = Workload()
    assert workload.nodes_lower_bound() == workload.nodes_first_fit() == 3


def test_no_binding_order_strands_a_fitting_pod_on_three_nodes() -> None:
    # A pod of size s is stranded on k nodes of size C only if every node has more than C - s
    # in use, so more than k(C - s) in all without it. Check that everything that can ever
    # bind (fitting pods, the unwatched and missing-Secret pods) minus the pod stays below.
    workload = Workload()
    template = workload.template()
    node = template.allocatable.memory
    nodes = workload.nodes_lower_bound()
    bindable = [
        p for p in workload.pods() if role_of(p) in (Role.FITS, Role.UNWATCHED, Role.MISSING_SECRET)
    ]
    total = sum(pod_requests(p).memory for p in bindable)
    for pod in workload.fitting_pods():
        size = pod_requests(pod).memory
        assert total - size <= nodes * (node - size), pod["metadata"]["name"]


def test_what_fits_a_node_of_the_pool() -> None:
    workload = Workload()
    template = workload.template()
    for pod in workload.pods():
        fit = pod_fits_template(pod, template)
        role = role_of(pod)
        if role is Role.TOO_BIG:
            assert fit.reason is FitReason.TOO_BIG
        elif role is Role.NO_MATCHING_NODE:
            assert fit.reason is FitReason.NODE_SELECTOR_MISMATCH
        else:
            # The unwatched and missing-Secret pods fit: something else must stop them.
            assert fit.fits, pod["metadata"]["name"]


def test_the_demo_template_is_the_autoscalers() -> None:
    workload = Workload()
    theirs = pool_template(parse_nodepool(workload.nodepool()))
    ours = workload.template()
    assert (ours.allocatable.cpu, ours.allocatable.memory) == (
        theirs.allocatable.cpu,
        theirs.allocatable.memory,
    )


def test_pods_are_in_the_namespaces_their_role_says() -> None:
    workload = Workload()
    for (namespace, _), role in workload.roles().items():
        if role is Role.UNWATCHED:
            assert namespace == UNWATCHED_NAMESPACE
        else:
            assert namespace in WATCHED_NAMESPACES


def test_missing_secret_pod_mounts_a_required_secret() -> None:
    pod = next(p for p in Workload().pods() if role_of(p) is Role.MISSING_SECRET)
    (volume,) = pod["spec"]["volumes"]
    assert volume["secret"]["optional"] is False


def test_manifests_name_the_pool_and_watch_the_seeds_namespaces() -> None:
    workload = Workload()
    pool = workload.nodepool()
    scaler = workload.autoscaler()
    assert pool["spec"]["memory"] == "96Gi"
    assert pool["spec"]["targetNodes"] == 0
    assert scaler["spec"]["nodePoolRef"]["name"] == pool["metadata"]["name"]
    assert scaler["spec"]["namespaces"] == ["prod", "money-maker"]


@pytest.mark.parametrize("pods", [5, 17, 30, 60])
def test_mixed_burst_of_any_size(pods: int) -> None:
    burst = mixed_burst(pods)
    assert sum(g.count for g in burst) == pods
    assert [g for g in burst if g.role is not Role.FITS] == list(NOT_TRIGGERING)
    workload = Workload.sized(pods)
    assert workload.shape.max_nodes >= workload.nodes_first_fit()


def test_mixed_burst_needs_a_fitting_pod() -> None:
    with pytest.raises(ValueError, match="at least 5 pods"):
        mixed_burst(4)


def test_pod_names_are_unique() -> None:
    names = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in Workload().pods()]
    assert len(names) == len(set(names))

"""Autoscaler: pods that wait on a Secret, ConfigMap or claim are set aside, not scaled for."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from nodepool_operator.controllers.autoscaler._decode import claim as read_claim
from nodepool_operator.controllers.autoscaler._pending import Blocked, Blocker, Lookup
from nodepool_operator.scheduling import References, pod_view


def pod(
    *, volumes: Sequence[Any] = (), containers: list[Any] | None = None, **spec: Any
) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "prod"},
        "spec": {
            "volumes": list(volumes),
            "containers": containers if containers is not None else [{"name": "app"}],
            **spec,
        },
    }


def claim(name: str, phase: str = "Pending", storage_class: str | None = None) -> dict[str, Any]:
    spec = {"storageClassName": storage_class} if storage_class is not None else {}
    return {
        "metadata": {"name": name, "namespace": "prod"},
        "spec": spec,
        "status": {"phase": phase},
    }


def test_references_cover_volumes_env_and_env_from_once_each_in_spec_order() -> None:
    p = pod(
        volumes=[
            {"name": "a", "secret": {"secretName": "tls"}},
            {"name": "b", "configMap": {"name": "conf"}},
            {
                "name": "c",
                "projected": {
                    "sources": [{"secret": {"name": "token"}}, {"configMap": {"name": "ca"}}]
                },
            },
            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
        ],
        initContainers=[{"name": "init", "envFrom": [{"secretRef": {"name": "tls"}}]}],
        containers=[
            {
                "name": "app",
                "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}},
                    {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "flags", "key": "x"}}},
                    {"name": "C", "value": "plain"},
                ],
                "envFrom": [{"configMapRef": {"name": "conf"}}],
            }
        ],
    )
    assert pod_view(p).references == References(
        secrets=("tls", "token", "db"),
        config_maps=("conf", "ca", "flags"),
        claims=("data", "web-scratch"),
    )


def test_optional_references_are_not_needed() -> None:
    p = pod(
        volumes=[{"name": "a", "secret": {"secretName": "tls", "optional": True}}],
        containers=[
            {
                "name": "app",
                "env": [
                    {"name": "A", "valueFrom": {"secretKeyRef": {"name": "db", "optional": True}}}
                ],
                "envFrom": [{"configMapRef": {"name": "conf", "optional": True}}],
            }
        ],
    )
    assert pod_view(p).references == References()


def test_image_pull_secrets_are_not_needed() -> None:
    assert pod_view(pod(imagePullSecrets=[{"name": "registry"}])).references == References()


def test_a_pod_with_everything_present_is_not_blocked() -> None:
    p = pod(
        volumes=[
            {"name": "a", "secret": {"secretName": "tls"}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
        ]
    )
    lookup = Lookup(
        secrets=frozenset({("prod", "tls")}),
        claims={("prod", "data"): read_claim(claim("data", "Bound"))},
    )
    assert lookup.blocker(pod_view(p)) is None


def test_missing_secret() -> None:
    p = pod(containers=[{"name": "app", "envFrom": [{"secretRef": {"name": "db"}}]}])
    # a Secret of that name in another namespace does not help
    lookup = Lookup(secrets=frozenset({("other", "db")}))
    assert lookup.blocker(pod_view(p)) == Blocked(Blocker.MISSING_SECRET, 'secret "db" not found')


def test_missing_config_map() -> None:
    p = pod(volumes=[{"name": "a", "configMap": {"name": "conf"}}])
    assert Lookup().blocker(pod_view(p)) == Blocked(
        Blocker.MISSING_CONFIG_MAP, 'configmap "conf" not found'
    )


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        (None, Blocked(Blocker.MISSING_PVC, 'persistentvolumeclaim "data" not found')),
        (
            claim("data", "Pending", "manual"),
            Blocked(
                Blocker.UNBOUND_PVC,
                'persistentvolumeclaim "data" is not bound '
                '(storage class "manual", immediate binding)',
            ),
        ),
        (
            claim("data", "Pending"),
            Blocked(
                Blocker.UNBOUND_PVC,
                'persistentvolumeclaim "data" is not bound (no storage class, immediate binding)',
            ),
        ),
        (
            claim("data", "Lost"),
            Blocked(Blocker.UNBOUND_PVC, 'persistentvolumeclaim "data" lost its volume'),
        ),
        (claim("data", "Bound"), None),
        # WaitForFirstConsumer: binds once the pod has a node, a new one included
        (claim("data", "Pending", "late"), None),
    ],
)
def test_claims(found: dict[str, Any] | None, expected: Blocked | None) -> None:
    p = pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    claims = {("prod", "data"): read_claim(found)} if found is not None else {}
    lookup = Lookup(claims=claims, late_binding_classes=frozenset({"late"}))
    assert lookup.blocker(pod_view(p)) == expected


def test_a_claim_being_deleted_is_as_good_as_missing() -> None:
    c = claim("data", "Bound")
    c["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    p = pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}])
    result = Lookup(claims={("prod", "data"): read_claim(c)}).blocker(pod_view(p))
    assert result is not None
    assert result.reason is Blocker.MISSING_PVC


def test_claims_are_reported_before_secrets() -> None:
    p = pod(
        volumes=[
            {"name": "a", "secret": {"secretName": "tls"}},
            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
        ]
    )
    result = Lookup().blocker(pod_view(p))
    assert result is not None
    assert result.reason is Blocker.MISSING_PVC


def test_malformed_fields_read_as_absent() -> None:
    p = {
        "metadata": {"name": "x", "namespace": "prod"},
        "spec": {"volumes": "nope", "containers": [7]},
    }
    assert pod_view(p).references == References()
    assert Lookup().blocker(pod_view(p)) is None


@pytest.mark.parametrize(
    ("priority", "expected"),
    [
        (-100, Blocked(Blocker.BELOW_PRIORITY_CUTOFF, "priority -100 < cutoff -10")),
        (-11, Blocked(Blocker.BELOW_PRIORITY_CUTOFF, "priority -11 < cutoff -10")),
        (-10, None),  # at the cutoff a pod still counts, as in cluster-autoscaler
        (0, None),
        (1000, None),
    ],
)
def test_expendable_pods_below_the_priority_cutoff_are_set_aside(
    priority: int, expected: Blocked | None
) -> None:
    assert Lookup().blocker(pod_view(pod(priority=priority))) == expected

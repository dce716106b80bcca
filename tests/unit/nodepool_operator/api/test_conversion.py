"""NodePool, Autoscaler and Instance conversion between v1alpha1 (the hub) and v1beta1: each field's
move, the round trip in both directions losing nothing (unmapped fields included), and clear
errors."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from kubeloop.crd import parse, to_api
from kubeloop.webhook import ConversionError
from nodepool_operator.api import (
    ALPHA_FIELDS,
    BETA_FIELDS,
    AutoscalerV1beta1,
    InstanceV1beta1,
    NodePoolV1beta1,
    autoscaler_converter,
    instance_converter,
    nodepool_converter,
    parse_autoscaler,
    parse_instance,
    parse_nodepool,
)
from tests.factories import autoscaler, instance, nodepool

ALPHA = "kubeloop.dev/v1alpha1"
BETA = "kubeloop.dev/v1beta1"
CONVERT = nodepool_converter()

TAINT = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
DISRUPTION = {"budgets": [{"nodes": "0"}], "drainTimeout": "5m", "expireAfter": "720h"}

# (v1alpha1 spec, the same spec as v1beta1)
CASES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "instance type only",
        {"instanceType": "m5.large"},
        {"template": {"spec": {"instanceType": "m5.large"}}},
    ),
    (
        "sizing grouped",
        {"instanceType": "m5.large", "targetNodes": 3, "minNodes": 1, "maxNodes": 7},
        {
            "size": {"target": 3, "min": 1, "max": 7},
            "template": {"spec": {"instanceType": "m5.large"}},
        },
    ),
    (
        "capacity grouped, diskSize renamed disk",
        {"instanceType": "c5.xlarge", "cpu": "4", "memory": "8Gi", "diskSize": "100Gi"},
        {
            "template": {
                "spec": {
                    "instanceType": "c5.xlarge",
                    "capacity": {"cpu": "4", "memory": "8Gi", "disk": "100Gi"},
                }
            }
        },
    ),
    (
        "every field",
        {
            "targetNodes": 2,
            "zoneTargets": {"zone-a": 1, "zone-b": 2},
            "minNodes": 0,
            "maxNodes": 10,
            "instanceType": "m5.large",
            "instanceTypes": ["r5.large", "c5.xlarge"],
            "memory": "16Gi",
            "labels": {"team": "ml"},
            "taints": [TAINT],
            "nodeClassRef": {"name": "default"},
            "reserveNewNodes": True,
            "disruption": DISRUPTION,
        },
        {
            "size": {"target": 2, "zoneTargets": {"zone-a": 1, "zone-b": 2}, "min": 0, "max": 10},
            "template": {
                "metadata": {"labels": {"team": "ml"}},
                "spec": {
                    "instanceType": "m5.large",
                    "instanceTypes": ["r5.large", "c5.xlarge"],
                    "capacity": {"memory": "16Gi"},
                    "taints": [TAINT],
                    "nodeClassRef": {"name": "default"},
                },
            },
            "reserveNewNodes": True,
            "disruption": DISRUPTION,
        },
    ),
]
IDS = [c[0] for c in CASES]


def _obj(api_version: str, spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    status = {"currentNodes": 1, "readyNodes": 1, "scaleOperation": "active"}
    return {
        "apiVersion": api_version,
        "kind": "NodePool",
        "metadata": {"name": "pool", "resourceVersion": "7", **meta},
        "spec": spec,
        "status": status,
    }


@pytest.mark.parametrize(("name", "alpha", "beta"), CASES, ids=IDS)
def test_each_field_moves_both_ways(name: str, alpha: dict[str, Any], beta: dict[str, Any]) -> None:
    as_beta = CONVERT.convert(_obj(ALPHA, copy.deepcopy(alpha)), BETA)
    assert as_beta == _obj(BETA, beta)  # status and metadata unchanged, no annotation added
    assert CONVERT.convert(_obj(BETA, copy.deepcopy(beta)), ALPHA) == _obj(ALPHA, alpha)


@pytest.mark.parametrize(("name", "alpha", "beta"), CASES, ids=IDS)
def test_round_trip_is_identity(name: str, alpha: dict[str, Any], beta: dict[str, Any]) -> None:
    for start, there in ((_obj(ALPHA, alpha), BETA), (_obj(BETA, beta), ALPHA)):
        back = CONVERT.convert(CONVERT.convert(copy.deepcopy(start), there), start["apiVersion"])
        assert back == start


def test_the_converted_object_parses_as_the_other_versions_type() -> None:
    """Every v1alpha1 value lands where the v1beta1 type reads it."""
    alpha = CASES[-1][1]
    pool = parse_nodepool(_obj(ALPHA, alpha))
    beta = parse(NodePoolV1beta1, CONVERT.convert(_obj(ALPHA, copy.deepcopy(alpha)), BETA))
    assert (beta.spec.size.target, beta.spec.size.min, beta.spec.size.max) == (2, 0, 10)
    assert beta.spec.template.metadata.labels == pool.spec.labels
    assert beta.spec.template.spec.taints == pool.spec.taints
    assert beta.spec.template.spec.capacity is not None
    assert beta.spec.template.spec.capacity.memory == pool.spec.memory
    assert beta.spec.disruption == pool.spec.disruption
    assert to_api(beta.status) == to_api(pool.status)


def test_a_factory_pool_round_trips() -> None:
    pool = nodepool("p", target=2, max_nodes=4, node_class="c", labels={"a": "b"})
    assert CONVERT.convert(CONVERT.convert(copy.deepcopy(pool), BETA), ALPHA) == pool


def test_a_v1beta1_field_v1alpha1_cannot_hold_waits_in_an_annotation() -> None:
    beta = _obj(BETA, {"template": {"spec": {"instanceType": "m5.large", "weight": 5}}})
    alpha = CONVERT.convert(copy.deepcopy(beta), ALPHA)
    assert alpha["spec"] == {"instanceType": "m5.large"}
    stashed = alpha["metadata"]["annotations"][BETA_FIELDS]
    assert json.loads(stashed) == {"template": {"spec": {"weight": 5}}}
    assert CONVERT.convert(alpha, BETA) == beta  # back, and the annotation gone


def test_a_v1alpha1_field_v1beta1_cannot_hold_waits_in_an_annotation() -> None:
    alpha = _obj(ALPHA, {"instanceType": "m5.large", "legacy": {"x": 1}}, annotations={"k": "v"})
    beta = CONVERT.convert(copy.deepcopy(alpha), BETA)
    assert beta["spec"] == {"template": {"spec": {"instanceType": "m5.large"}}}
    assert beta["metadata"]["annotations"] == {"k": "v", ALPHA_FIELDS: '{"legacy":{"x":1}}'}
    assert CONVERT.convert(beta, ALPHA) == alpha  # the user's own annotation kept


@pytest.mark.parametrize(
    "raw", ["{nope", "[1]", '"a string"'], ids=["not JSON", "a list", "a string"]
)
@pytest.mark.parametrize(
    ("key", "start", "end"), [(BETA_FIELDS, ALPHA, BETA), (ALPHA_FIELDS, BETA, ALPHA)]
)
def test_a_stash_annotation_not_a_json_object_stays_and_the_conversion_goes_on(
    raw: str, key: str, start: str, end: str
) -> None:
    """Not an error: while v1beta1 is stored and the controllers read v1alpha1, a failed
    conversion of one object would fail every list and watch of its kind."""
    spec: dict[str, Any] = (
        {"instanceType": "m5.large"}
        if start == ALPHA
        else {"template": {"spec": {"instanceType": "m5.large"}}}
    )
    obj = _obj(start, spec, annotations={key: raw, "k": "v"})
    there = CONVERT.convert(copy.deepcopy(obj), end)
    assert there["metadata"]["annotations"] == {key: raw, "k": "v"}
    assert CONVERT.convert(there, start) == obj


def test_a_spec_not_an_object_is_a_clear_error() -> None:
    bad = _obj(ALPHA, "m5.large")  # type: ignore[arg-type]
    with pytest.raises(ConversionError, match="spec must be an object, got str"):
        CONVERT.convert(bad, BETA)


def test_a_bad_v1beta1_nesting_names_the_field() -> None:
    with pytest.raises(ConversionError, match=r"spec\.template\.spec must be an object, got list"):
        CONVERT.convert(_obj(BETA, {"template": {"spec": []}}), ALPHA)


def test_an_object_without_spec_converts() -> None:
    obj = _obj(ALPHA, {})
    del obj["spec"]
    assert "spec" not in CONVERT.convert(copy.deepcopy(obj), BETA)


# -- Autoscaler --------------------------------------------------------------------------------
SCALERS = autoscaler_converter()
SCALER_ALPHA = {
    "nodePoolRef": {"name": "p"},
    "namespaces": ["prod", "batch"],
    "frequency": "30s",
    "maxNodes": 5,
    "weight": 10,
    "scaleDownEnabled": True,
    "scaleDownUnneededTime": "15m",
    "scaleDownConsolidation": False,
}
SCALER_BETA = {
    "nodePoolRef": {"name": "p"},
    "namespaces": ["prod", "batch"],
    "frequency": "30s",
    "maxNodes": 5,
    "weight": 10,
    "scaleDown": {"enabled": True, "unneededTime": "15m", "consolidation": False},
}


def _scaler(api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "Autoscaler",
        "metadata": {"name": "a"},
        "spec": spec,
    }


def test_autoscaler_scale_down_fields_group_both_ways() -> None:
    assert SCALERS.convert(_scaler(ALPHA, dict(SCALER_ALPHA)), BETA) == _scaler(BETA, SCALER_BETA)
    assert SCALERS.convert(_scaler(BETA, copy.deepcopy(SCALER_BETA)), ALPHA) == _scaler(
        ALPHA, SCALER_ALPHA
    )
    beta = parse(AutoscalerV1beta1, _scaler(BETA, SCALER_BETA))
    alpha = parse_autoscaler(_scaler(ALPHA, SCALER_ALPHA))
    assert (
        beta.spec.scale_down.enabled,
        beta.spec.scale_down.unneeded_time,
        beta.spec.scale_down.consolidation,
    ) == (
        alpha.spec.scale_down_enabled,
        alpha.spec.scale_down_unneeded_time,
        alpha.spec.scale_down_consolidation,
    )
    assert alpha.spec.scale_down_consolidation is False
    default = parse_autoscaler(_scaler(ALPHA, {"nodePoolRef": {"name": "p"}, "namespaces": ["x"]}))
    assert default.spec.scale_down_consolidation is True  # on unless turned off
    assert beta.spec.weight == alpha.spec.weight == 10


def test_an_autoscaler_round_trips() -> None:
    for start in (autoscaler("a", pool="p", namespaces=["x"]), autoscaler("b", frequency=None)):
        assert SCALERS.convert(SCALERS.convert(copy.deepcopy(start), BETA), ALPHA) == start
    beta = _scaler(BETA, {"nodePoolRef": {"name": "p"}, "namespaces": ["x"], "scaleDown": {}})
    # an emptied group is not carried: it holds nothing to keep
    back = SCALERS.convert(SCALERS.convert(copy.deepcopy(beta), ALPHA), BETA)
    assert back["spec"] == {"nodePoolRef": {"name": "p"}, "namespaces": ["x"]}


# -- Instance ----------------------------------------------------------------------------------
def test_instance_image_is_named_image_id_in_v1beta1() -> None:
    vm = instance("vm", namespace="ns", image="ami-0abcdef1234567890", nodeClassRef={"name": "c"})
    beta = instance_converter().convert(copy.deepcopy(vm), BETA)
    assert beta["spec"] == {
        "imageId": "ami-0abcdef1234567890",
        "instanceType": "m5.large",
        "nodeClassRef": {"name": "c"},
    }
    assert parse(InstanceV1beta1, beta).spec.image_id == parse_instance(vm).spec.image
    assert instance_converter().convert(beta, ALPHA) == vm

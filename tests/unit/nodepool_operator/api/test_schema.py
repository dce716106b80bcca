"""The CRDs generated from nodepool_operator.api: structural, carrying the promised defaults
and markers, identical to the committed config/crd files, and mirrored by the Python parser."""

from __future__ import annotations

import doctest
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml

import nodepool_operator.api as api
from kubeloop.crd import (
    DURATION_PATTERN,
    QUANTITY_PATTERN,
    Minimum,
    kind_schema,
    schema,
)
from nodepool_operator import manifests
from nodepool_operator.api import (
    AUTOSCALERS,
    INSTANCES,
    NODEPOOLS,
    InvalidField,
    crds,
    format_duration,
    parse_autoscaler,
    parse_duration,
    parse_instance,
    parse_nodepool,
    to_api,
)
from tests import factories

CRD_DIR = Path(__file__).resolve().parents[4] / "config" / "crd"


def by_plural() -> dict[str, dict[str, Any]]:
    return {c["spec"]["names"]["plural"]: c for c in crds()}


def version(plural: str) -> dict[str, Any]:
    versions: list[dict[str, Any]] = by_plural()[plural]["spec"]["versions"]
    assert len(versions) == 1
    return versions[0]


def root(plural: str) -> dict[str, Any]:
    node: dict[str, Any] = version(plural)["schema"]["openAPIV3Schema"]
    return node


def spec_of(plural: str) -> dict[str, Any]:
    node: dict[str, Any] = root(plural)["properties"]["spec"]
    return node


def status_of(plural: str) -> dict[str, Any]:
    node: dict[str, Any] = root(plural)["properties"]["status"]
    return node


# -- the committed files ---------------------------------------------------------------------
@pytest.mark.parametrize("out", manifests.DEFAULT_OUTS, ids=str)
def test_committed_crds_match_the_types(out: Path) -> None:
    """Fails when someone edits the types (or the YAML) without `make manifests`: in config/crd
    and in the Helm chart's crds/ alike, so the chart's CRDs never differ from config/crd."""
    directory = CRD_DIR.parents[1] / out
    committed = {p.name: p.read_text(encoding="utf-8") for p in directory.glob("kubeloop.dev_*")}
    generated = manifests.render()
    assert sorted(committed) == sorted(generated), "run `make manifests`"
    for name, text in generated.items():
        assert committed[name] == text, f"{name} is stale: run `make manifests`"


def test_render_is_deterministic_and_loads_back() -> None:
    first, second = manifests.render(), manifests.render()
    assert first == second
    assert sorted(first) == [
        "kubeloop.dev_autoscalers.yaml",
        "kubeloop.dev_awsnodeclasses.yaml",
        "kubeloop.dev_instances.yaml",
        "kubeloop.dev_nodepools.yaml",
    ]
    assert [yaml.safe_load(first[manifests.filename(c)]) for c in crds()] == crds()


def test_check_reports_drift_and_write_repairs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = ["--out", str(tmp_path)]
    assert manifests.main(["--check", *out]) == 1  # nothing written yet
    assert manifests.main(out) == 0
    assert manifests.main(["--check", *out]) == 0
    capsys.readouterr()

    pools = tmp_path / "kubeloop.dev_nodepools.yaml"
    pools.write_text(pools.read_text().replace("default: 10", "default: 12"))
    (tmp_path / "kubeloop.dev_widgets.yaml").write_text("left over\n")
    (tmp_path / "README.md").write_text("not ours\n")
    assert manifests.main(["--check", *out]) == 1
    diff = capsys.readouterr().out
    assert "-                default: 12" in diff
    assert "+                default: 10" in diff
    assert "-left over" in diff

    assert manifests.main(out) == 0
    assert manifests.main(["--check", *out]) == 0
    assert not (tmp_path / "kubeloop.dev_widgets.yaml").exists()
    assert (tmp_path / "README.md").exists()


def test_every_out_directory_gets_the_same_files_and_check_names_the_stale_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "config-crd", tmp_path / "chart-crds"
    outs = ["--out", str(first), "--out", str(second)]
    assert manifests.main(outs) == 0
    assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in second.iterdir())
    assert len(list(second.iterdir())) == 4
    (second / "kubeloop.dev_instances.yaml").write_text("hand-edited\n")
    capsys.readouterr()
    assert manifests.main(["--check", *outs]) == 1
    diff = capsys.readouterr().out
    assert f"--- {second / 'kubeloop.dev_instances.yaml'}" in diff
    assert str(first) not in diff
    assert manifests.main(outs) == 0
    assert manifests.main(["--check", *outs]) == 0


# -- structural schema -----------------------------------------------------------------------
def walk(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")
    if "items" in node:
        yield from walk(node["items"], f"{path}[]")


@pytest.mark.parametrize("plural", ["nodepools", "autoscalers", "instances", "awsnodeclasses"])
def test_schema_is_structural_and_documented(plural: str) -> None:
    for path, node in walk(root(plural)):
        if node.get("x-kubernetes-int-or-string"):
            # the one structural node without a type: anyOf may only repeat the two types
            assert "type" not in node, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
        else:
            assert node.get("type") in {"object", "array", "string", "integer", "boolean"}, path
        if path == ".metadata":
            assert node == {"type": "object"}  # the apiserver owns metadata's schema
            continue
        assert node.get("description") or path.endswith(("[]", "{}")), f"{path} undocumented"
        if node.get("type") == "object":
            assert "properties" in node or "additionalProperties" in node, path
            assert set(node.get("required", ())) <= set(node.get("properties", {})), path
        if node.get("type") == "array":
            assert "items" in node, path
        assert "nullable" not in node, path


@pytest.mark.parametrize("plural", ["nodepools", "autoscalers", "instances"])
def test_crd_is_served_with_status_and_columns(plural: str) -> None:
    crd = by_plural()[plural]
    res = {"nodepools": NODEPOOLS, "autoscalers": AUTOSCALERS, "instances": INSTANCES}[plural]
    assert crd["metadata"]["name"] == res.key == f"{plural}.kubeloop.dev"
    assert crd["spec"]["group"] == res.group
    assert crd["spec"]["names"]["kind"] == res.kind
    assert crd["spec"]["scope"] == ("Namespaced" if res.namespaced else "Cluster")
    v = version(plural)
    assert (v["name"], v["served"], v["storage"]) == (res.version, True, True)
    assert v["subresources"]["status"] == {}
    assert root(plural)["required"] == ["spec"]
    assert v["additionalPrinterColumns"][-1]["name"] == "Age"


def test_node_classes_are_cluster_scoped_settings_without_status() -> None:
    crd = by_plural()["awsnodeclasses"]
    assert crd["spec"]["scope"] == "Cluster"
    assert "subresources" not in version("awsnodeclasses")
    assert "status" not in root("awsnodeclasses")["properties"]
    spec = spec_of("awsnodeclasses")
    assert "required" not in spec, "the AMI is exactly-one-of, a CEL rule"
    assert {
        "message": "exactly one of amiId and amiSsmParameter must be set",
        "rule": "has(self.amiId) != has(self.amiSsmParameter)",
    } in spec["x-kubernetes-validations"]


def test_nodepool_spec_markers_and_defaults() -> None:
    props = spec_of("nodepools")["properties"]
    assert props["targetNodes"] | {"description": ""} == {
        "default": 0,
        "description": "",
        "format": "int64",
        "maximum": 1000,
        "minimum": 0,
        "type": "integer",
    }
    assert (props["minNodes"]["default"], props["minNodes"]["minimum"]) == (0, 0)
    assert (props["maxNodes"]["default"], props["maxNodes"]["minimum"]) == (10, 1)
    assert props["instanceType"]["minLength"] == 1
    assert spec_of("nodepools")["required"] == ["instanceType"]
    for quantity in ("cpu", "memory", "diskSize"):
        assert props[quantity]["pattern"] == QUANTITY_PATTERN
        assert props[quantity]["x-kubernetes-int-or-string"] is True
        assert "default" not in props[quantity]
    assert props["labels"]["additionalProperties"]["type"] == "string"
    assert props["zoneTargets"]["additionalProperties"] == {
        "type": "integer",
        "format": "int64",
        "minimum": 0,
    }
    taint = props["taints"]["items"]
    assert taint["properties"]["effect"]["enum"] == ["NoSchedule", "PreferNoSchedule", "NoExecute"]
    assert taint["required"] == ["effect", "key"]
    assert {
        "rule": "self.minNodes <= self.maxNodes",
        "message": "minNodes must be less than or equal to maxNodes",
        "fieldPath": ".minNodes",
    } in spec_of("nodepools")["x-kubernetes-validations"]


def test_nodepool_status_scale_and_columns() -> None:
    props = status_of("nodepools")["properties"]
    assert set(props) == {
        "currentNodes",
        "readyNodes",
        "scaleOperation",
        "observedGeneration",
        "selector",
        "conditions",
        "instances",
        "disruption",
        "zones",
    }
    assert props["scaleOperation"]["enum"] == ["inactive", "active"]
    assert props["selector"]["type"] == "string"
    for word in ("Ready", "Scaling", "Degraded"):
        assert word in props["conditions"]["description"]
    instance = props["instances"]["items"]
    assert set(instance["properties"]) == {
        "name",
        "instanceId",
        "state",
        "nodeName",
        "zone",
        "subnet",
    }
    assert props["instances"]["x-kubernetes-list-map-keys"] == ["name"]
    v = version("nodepools")
    assert v["subresources"]["scale"] == {
        "specReplicasPath": ".spec.targetNodes",
        "statusReplicasPath": ".status.currentNodes",
        "labelSelectorPath": ".status.selector",
    }
    columns = [
        (c["name"], c["jsonPath"], c.get("priority", 0)) for c in v["additionalPrinterColumns"]
    ]
    assert columns == [
        ("Target", ".spec.targetNodes", 0),
        ("Ready", ".status.readyNodes", 0),
        ("Scaling", ".status.scaleOperation", 0),
        ("Type", ".spec.instanceType", 1),
        ("Zones", ".status.zones", 1),
        ("Age", ".metadata.creationTimestamp", 0),
    ]
    assert by_plural()["nodepools"]["spec"]["names"]["shortNames"] == ["np"]


@pytest.mark.parametrize("plural", ["nodepools", "autoscalers", "instances"])
def test_conditions_are_metav1_conditions(plural: str) -> None:
    conditions = status_of(plural)["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert item["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]
    props = item["properties"]
    assert props["status"]["enum"] == ["True", "False", "Unknown"]
    assert props["lastTransitionTime"]["format"] == "date-time"
    assert props["observedGeneration"]["minimum"] == 0
    assert (props["reason"]["minLength"], props["reason"]["maxLength"]) == (1, 1024)
    assert props["type"]["maxLength"] == 316
    assert props["message"]["maxLength"] == 32768


def test_autoscaler_markers_and_defaults() -> None:
    spec = spec_of("autoscalers")
    props = spec["properties"]
    assert spec["required"] == ["namespaces", "nodePoolRef"]
    assert props["nodePoolRef"]["required"] == ["name"]
    assert props["namespaces"]["minItems"] == 1
    assert props["frequency"]["default"] == "5m"
    assert props["frequency"]["pattern"] == DURATION_PATTERN
    assert props["scaleDownUnneededTime"]["default"] == "10m"
    assert props["scaleDownEnabled"] == props["scaleDownEnabled"] | {
        "type": "boolean",
        "default": False,
    }
    assert props["maxNodes"]["minimum"] == 1
    assert "default" not in props["maxNodes"]
    status = status_of("autoscalers")["properties"]
    assert status["lastScaleTime"]["format"] == "date-time"
    columns = [c["name"] for c in version("autoscalers")["additionalPrinterColumns"]]
    assert columns == ["Pool", "Pending", "Decision", "Age"]


def test_instance_schema() -> None:
    assert spec_of("instances")["required"] == ["image", "instanceType"]
    status = status_of("instances")["properties"]
    assert set(status) == {
        "instanceId",
        "publicIP",
        "state",
        "lastCheckedAt",
        "observedGeneration",
        "conditions",
    }
    columns = [(c["name"], c["jsonPath"]) for c in version("instances")["additionalPrinterColumns"]]
    assert columns == [
        ("ID", ".status.instanceId"),
        ("State", ".status.state"),
        ("IP", ".status.publicIP"),
        ("Age", ".metadata.creationTimestamp"),
    ]


@pytest.mark.parametrize(
    ("text", "ok"),
    [("28Gi", True), ("500m", True), ("4", True), ("1e3", True), (".5", True), ("28Gb", False),
     ("4 Gi", False), ("", False), ("Gi", False)],
)  # fmt: skip
def test_quantity_pattern(text: str, ok: bool) -> None:
    assert bool(re.search(QUANTITY_PATTERN, text)) is ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [("5m", True), ("1h30m", True), ("250ms", True), ("1.5s", True), ("90µs", True),
     ("5 minutes", False), ("5", False), ("-5m", False), ("", False), ("5d", False)],
)  # fmt: skip
def test_duration_pattern(text: str, ok: bool) -> None:
    assert bool(re.search(DURATION_PATTERN, text)) is ok


# -- the generator's own rules ---------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Undocumented:
    """A type with a field nobody described."""

    count: int = 0


@dataclass(frozen=True, kw_only=True)
class Nameless:
    count: int = 0
    """Documented, unlike the class."""


@dataclass(frozen=True, kw_only=True)
class Misplaced:
    """A type with a marker on the wrong kind of field."""

    label: Annotated[str, Minimum(0)] = ""
    """A string cannot have a minimum."""


@dataclass(frozen=True, kw_only=True)
class Wrapper:
    """A kind-shaped type."""

    spec: Misplaced
    """Its spec."""


def test_generator_refuses_an_undocumented_field() -> None:
    with pytest.raises(TypeError, match=r"Undocumented\.count: document the field"):
        schema(Undocumented)


def test_generator_refuses_an_undocumented_class() -> None:
    with pytest.raises(TypeError, match=r"Nameless: document the class"):
        schema(Nameless)


def test_generator_refuses_a_misplaced_marker() -> None:
    with pytest.raises(TypeError, match=r"Misplaced\.label: Minimum\(value=0\)"):
        kind_schema(Wrapper)


# -- the Python mirror: parse and to_api -----------------------------------------------------
def pool(**spec: Any) -> dict[str, Any]:
    return factories.nodepool(target=None, instance_type="m5", generation=3, **spec)


def test_parse_nodepool_fills_in_the_schema_defaults() -> None:
    parsed = parse_nodepool(pool())
    assert (parsed.spec.target_nodes, parsed.spec.min_nodes, parsed.spec.max_nodes) == (0, 0, 10)
    assert parsed.spec.labels == {}
    assert parsed.spec.taints == []
    assert parsed.spec.memory is None
    assert parsed.status.scale_operation == "inactive"
    assert parsed.status.conditions == []
    assert (parsed.metadata.name, parsed.metadata.generation) == ("p", 3)
    # a default in the schema is a default in Python, and the other way round
    props = spec_of("nodepools")["properties"]
    assert to_api(parsed.spec) == {
        "instanceType": "m5",
        **{k: v["default"] for k, v in props.items() if "default" in v},
    }


def test_disruption_waits_default_to_an_hour_for_deletion_and_ten_minutes_for_a_drain() -> None:
    disruption = parse_nodepool(pool()).spec.disruption
    assert disruption.termination_grace_period == timedelta(hours=1)
    assert disruption.drain_timeout == timedelta(minutes=10)
    given = parse_nodepool(pool(disruption={"terminationGracePeriod": "0s", "drainTimeout": "3s"}))
    assert given.spec.disruption.termination_grace_period == timedelta(0)
    assert given.spec.disruption.drain_timeout == timedelta(seconds=3)


def test_expire_after_defaults_to_never_and_reads_a_duration() -> None:
    assert parse_nodepool(pool()).spec.disruption.expire_after is None
    given = parse_nodepool(pool(disruption={"expireAfter": "720h"}))
    assert given.spec.disruption.expire_after == timedelta(hours=720)


def test_parse_reads_status_and_conditions() -> None:
    obj = pool() | {
        "status": {
            "currentNodes": 2,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "InvalidSpec",
                    "message": "spec.memory: bad",
                    "lastTransitionTime": "2026-01-02T03:04:05Z",
                    "observedGeneration": 3,
                }
            ],
            "instances": [{"name": "p-0", "state": "creating"}],
        }
    }
    parsed = parse_nodepool(obj)
    (ready,) = parsed.status.conditions
    assert ready.last_transition_time == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert parsed.status.instances[0].instance_id is None
    assert to_api(parsed.status)["conditions"] == obj["status"]["conditions"]


def test_parse_autoscaler_and_instance() -> None:
    scaler = parse_autoscaler({"spec": {"nodePoolRef": {"name": "p"}, "namespaces": ["prod"]}})
    assert scaler.spec.frequency == timedelta(minutes=5)
    assert scaler.spec.scale_down_unneeded_time == timedelta(minutes=10)
    assert scaler.spec.scale_down_enabled is False
    assert scaler.spec.max_nodes is None
    vm = parse_instance(
        {"spec": {"image": "ami-1", "instanceType": "m5"}, "status": {"publicIP": "203.0.113.7"}}
    )
    assert vm.status.public_ip == "203.0.113.7"
    assert to_api(vm.status) == {"publicIP": "203.0.113.7", "observedGeneration": 0}


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        (pool(targetNodes=-1), "spec.targetNodes"),
        (pool(minNodes=5, maxNodes=3), "spec.minNodes"),
        (pool(targetNodes=11), "spec.targetNodes"),
        (pool(memory="28Gb"), "spec.memory"),
        (pool(diskSize="-1Gi"), "spec.diskSize"),
        (pool(targetNodes="3"), "spec.targetNodes"),
        (pool(targetNodes=True), "spec.targetNodes"),
        (pool(instanceType=""), "spec.instanceType"),
        (pool(taints=[{"key": "a", "effect": "NoScheduel"}]), "spec.taints[0].effect"),
        (pool(labels={"kubeloop.dev/nodepool": "x"}), "spec.labels"),
        (pool(labels={"bad key!": "x"}), "spec.labels"),
        (pool(disruption={"drainTimeout": "0s"}), "spec.disruption.drainTimeout"),
        (pool(disruption={"expireAfter": "Never"}), "spec.disruption.expireAfter"),
        (pool(disruption={"expireAfter": "0s"}), "spec.disruption.expireAfter"),
        (
            pool(disruption={"terminationGracePeriod": "-5m"}),
            "spec.disruption.terminationGracePeriod",
        ),
        ({"spec": {}}, "spec.instanceType"),
        ({"metadata": {}}, "spec"),
        (
            {"spec": {"nodePoolRef": {"name": "p"}, "namespaces": ["p"], "frequency": "5 minutes"}},
            "spec.frequency",
        ),
        ({"spec": {"nodePoolRef": {"name": "p"}, "namespaces": []}}, "spec.namespaces"),
        ({"spec": {"nodePoolRef": {"name": "p"}, "namespaces": ["a", "a"]}}, "spec.namespaces[1]"),
    ],
)
def test_parse_names_the_offending_field(obj: dict[str, Any], path: str) -> None:
    parser = parse_autoscaler if "nodePoolRef" in obj.get("spec", {}) else parse_nodepool
    with pytest.raises(InvalidField) as caught:
        parser(obj)
    assert caught.value.path == path
    assert str(caught.value).startswith(f"{path}: ")


def test_quantities_parse_as_strings() -> None:
    parsed = parse_nodepool(pool(cpu=12, memory="96Gi"))
    assert (parsed.spec.cpu, parsed.spec.memory) == ("12", "96Gi")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("5m", timedelta(minutes=5)),
        ("10m", timedelta(minutes=10)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("90s", timedelta(seconds=90)),
        ("250ms", timedelta(milliseconds=250)),
        ("1.5s", timedelta(seconds=1.5)),
        ("0s", timedelta(0)),
    ],
)
def test_durations(text: str, value: timedelta) -> None:
    assert parse_duration(text) == value
    assert parse_duration(format_duration(value)) == value
    with pytest.raises(ValueError, match="duration"):
        parse_duration("5 minutes")


def test_format_duration_is_short() -> None:
    assert format_duration(timedelta(minutes=5)) == "5m"
    assert format_duration(timedelta(seconds=90)) == "1m30s"
    assert format_duration(timedelta(seconds=1.5)) == "1.5s"


def test_module_examples() -> None:
    assert doctest.testmod(api).failed == 0

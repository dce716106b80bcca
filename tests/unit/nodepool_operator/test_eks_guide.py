"""docs/eks.md cannot drift from the code: its manifests are parsed by the operator's own
typed parse and checked field by field against the committed CRD schemas (the apiserver
would prune an unknown field silently, so a misspelt one is caught here); every Degraded
reason its table names is one the code can produce; and the field names, chart values and
operator flags its prose names exist. Its chart values are rendered by the
real helm in tests/integration/test_eks_guide_chart.py."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

import nodepool_operator.cloud as cloud
from nodepool_operator.api import parse_autoscaler, parse_nodeclass, parse_nodepool
from nodepool_operator.cloud import _aws_errors
from nodepool_operator.controllers import _launch

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "eks.md"
CLOUD_SOURCE = ROOT / "packages" / "nodepool-operator" / "src" / "nodepool_operator" / "cloud"

#: kind -> (CRD file, the operator's parse of it)
KINDS: dict[str, tuple[str, Callable[[Mapping[str, Any]], object]]] = {
    "AwsNodeClass": ("kubeloop.dev_awsnodeclasses.yaml", parse_nodeclass),
    "NodePool": ("kubeloop.dev_nodepools.yaml", parse_nodepool),
    "Autoscaler": ("kubeloop.dev_autoscalers.yaml", parse_autoscaler),
}
VALUES_MARK = "# helm values"


def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"^```yaml\n(.*?)^```", text, flags=re.M | re.S)


def manifests() -> list[dict[str, Any]]:
    docs = []
    for block in yaml_blocks(GUIDE.read_text()):
        if block.startswith(VALUES_MARK):
            continue
        for doc in yaml.safe_load_all(block):
            if isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("kubeloop.dev/"):
                docs.append(doc)
    return docs


def crd_version(kind: str, api_version: str) -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "config" / "crd" / KINDS[kind][0]).read_text())
    group, _, version = api_version.partition("/")
    assert crd["spec"]["group"] == group
    served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
    assert version in served, f"{kind} {api_version}: served versions are {sorted(served)}"
    found: dict[str, Any] = served[version]
    return found


def unknown_fields(value: Any, schema: Mapping[str, Any], path: str) -> Iterator[str]:
    """Paths in ``value`` the structural ``schema`` has no place for."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if props is not None and key in props:
                yield from unknown_fields(item, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                yield from unknown_fields(item, extra, f"{path}.{key}")
            elif props is not None:
                yield f"{path}.{key}"
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            yield from unknown_fields(item, schema["items"], f"{path}[{i}]")


def test_the_guide_has_a_node_class_a_pool_and_an_autoscaler_that_name_each_other() -> None:
    docs = manifests()
    assert sorted(d["kind"] for d in docs) == ["Autoscaler", "AwsNodeClass", "NodePool"]
    by_kind = {d["kind"]: d for d in docs}
    pool = by_kind["NodePool"]
    assert pool["spec"]["nodeClassRef"]["name"] == by_kind["AwsNodeClass"]["metadata"]["name"]
    assert by_kind["Autoscaler"]["spec"]["nodePoolRef"]["name"] == pool["metadata"]["name"]
    # the class joins the cluster the shell snippets name
    exported = re.search(r"^export CLUSTER_NAME=(\S+)$", GUIDE.read_text(), flags=re.M)
    assert exported is not None
    assert by_kind["AwsNodeClass"]["spec"]["cluster"]["name"] == exported.group(1)


@pytest.mark.parametrize("doc", manifests(), ids=lambda d: str(d["kind"]))
def test_each_manifest_parses_and_has_only_schema_fields(doc: dict[str, Any]) -> None:
    kind = doc["kind"]
    KINDS[kind][1](doc)  # raises InvalidField naming the field
    schema = crd_version(kind, doc["apiVersion"])["schema"]["openAPIV3Schema"]
    assert list(unknown_fields(doc, schema, kind)) == []


def test_unknown_field_walk_catches_a_misspelt_field() -> None:
    doc = next(d for d in manifests() if d["kind"] == "AwsNodeClass")
    spec = {**doc["spec"], "rootVolume": {"sizeGiB": 50}, "subnetSelector": {}}
    schema = crd_version("AwsNodeClass", doc["apiVersion"])["schema"]["openAPIV3Schema"]
    found = list(unknown_fields({**doc, "spec": spec}, schema, "AwsNodeClass"))
    assert found == ["AwsNodeClass.spec.rootVolume.sizeGiB", "AwsNodeClass.spec.subnetSelector"]


def degraded_reasons_in_the_guide() -> list[str]:
    text = GUIDE.read_text()
    table = text[text.index("| `Degraded` reason |") :]
    table = table[: table.index("\n\n")]
    rows = [line for line in table.splitlines()[2:] if line.startswith("|")]
    return [name for row in rows for name in re.findall(r"`(\w+)`", row.split("|")[1])]


def reasons_the_code_sets() -> set[str]:
    """Degraded's reason is an InvalidRequest's ``reason`` or the error's class name
    (controllers/nodepool/_pool_status.cloud_failure)."""
    classes = {
        name
        for name, obj in vars(cloud).items()
        if isinstance(obj, type) and issubclass(obj, cloud.CloudError)
    }
    classes.add(_launch.NodeClassUnavailable.__name__)
    invalid = set(_aws_errors._REASON_BY_CODE.values())
    invalid |= {named for _, named in _aws_errors._REASON_BY_WORD}
    invalid.add(_aws_errors.invalid_reason("Nothing", ""))
    # reasons given where the error is raised (e.g. InvalidCluster in AwsCloud.describe_cluster)
    for source in CLOUD_SOURCE.glob("*.py"):
        invalid |= set(re.findall(r'reason="(\w+)"', source.read_text()))
    return classes | invalid


def test_every_degraded_reason_in_the_guide_is_one_the_code_sets() -> None:
    named = degraded_reasons_in_the_guide()
    assert len(named) >= 10
    assert "InvalidAMI" in named
    assert "InvalidInstanceProfile" in named
    assert sorted(set(named) - reasons_the_code_sets()) == []


def section(title: str) -> str:
    """The prose of the guide's section ``title`` (its code blocks left out)."""
    text = GUIDE.read_text()
    start = text.index(f"\n## {title}")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else None]
    return re.sub(r"^```.*?^```", "", body, flags=re.M | re.S)


def schema_paths(schema: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    """Every field path under ``schema`` (a.b.c), array items transparent."""
    if isinstance(schema.get("items"), dict):
        yield from schema_paths(schema["items"], prefix)
    for key, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{key}"
        yield path
        yield from schema_paths(sub, f"{path}.")


def value_paths(values: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(values, dict):
        for key, sub in values.items():
            yield f"{prefix}{key}"
            yield from value_paths(sub, f"{prefix}{key}.")


def test_every_node_class_field_the_prose_names_exists() -> None:
    """Section 4 names fields as `field` or `parent.field`: each is a path of the class's spec
    (or ends one), or a key of the NodeConfig the operator writes."""
    schema = crd_version("AwsNodeClass", "kubeloop.dev/v1alpha1")["schema"]["openAPIV3Schema"]
    spec_paths = set(schema_paths(schema["properties"]["spec"]))
    leaves = {p.rsplit(".", 1)[-1] for p in spec_paths}
    nodeconfig = (CLOUD_SOURCE / "_nodeconfig.py").read_text()
    named = re.findall(r"`([a-z]+[A-Z]\w*|[a-z]\w*\.[a-z]\w*)(?::[^`]*)?`", section("4."))
    assert {"amiSsmParameter", "cluster.name", "rootVolume", "securityGroupIds"} <= set(named)
    unknown = [
        n for n in named if n not in spec_paths and n not in leaves and f'"{n}"' not in nodeconfig
    ]
    assert unknown == []


def test_every_chart_value_and_operator_flag_the_prose_names_exists() -> None:
    values = yaml.safe_load((ROOT / "charts" / "nodepool-operator" / "values.yaml").read_text())
    paths = set(value_paths(values))
    prose = section("3.") + section("6.")
    named = set(re.findall(r"`((?:cloud|webhook|operator|serviceAccount|image)\.[\w.]+)", prose))
    named |= set(re.findall(r"`(nodeSelector|tolerations)`", prose))
    assert {"cloud.aws.region", "operator.registrationTimeoutSeconds"} <= named
    assert sorted(named - paths) == []
    main = ROOT / "packages" / "nodepool-operator" / "src" / "nodepool_operator" / "__main__.py"
    flags = set(re.findall(r"`(--[a-z][a-z-]*)", prose))
    assert {"--aws-region", "--registration-timeout"} <= flags
    assert sorted(f for f in flags if f'"{f}"' not in main.read_text()) == []


def test_every_pool_field_the_prose_names_exists() -> None:
    schema = crd_version("NodePool", "kubeloop.dev/v1alpha1")["schema"]["openAPIV3Schema"]
    paths = set(schema_paths(schema))
    prose = section("5.") + section("6.")
    named = set(re.findall(r"`((?:spec|status)\.[\w.]+)`", prose))
    assert {"spec.targetNodes", "status.instances"} <= named
    records = {p.rsplit(".", 1)[-1] for p in paths if p.startswith("status.instances.")}
    assert {"name", "instanceId", "state", "nodeName"} <= records
    assert sorted(named - paths) == []

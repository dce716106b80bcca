"""kubeloop.testing's helpers without a control plane: the CRD builder, eventually,
new_manager and running."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubeloop import REGISTRY, Resource
from kubeloop._client import Client
from kubeloop._config import ClusterConfig
from kubeloop.testing import (
    NodeFactory,
    ScaleSpec,
    eventually,
    new_manager,
    resource_of,
    running,
    simple_crd,
)
from kubeloop.testing.plugin import NodeFactory as PluginNodeFactory


def _version(crd: dict[str, Any]) -> dict[str, Any]:
    [version] = crd["spec"]["versions"]
    return dict(version)


def test_simple_crd_with_status_has_the_status_subresource() -> None:
    crd = simple_crd(
        "example.dev",
        "Widget",
        spec={"size": {"type": "integer", "minimum": 0}},
        status={"phase": {"type": "string", "enum": ["Pending", "Ready"]}},
    )
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"] == {"name": "widgets.example.dev"}
    assert crd["spec"]["group"] == "example.dev"
    assert crd["spec"]["scope"] == "Namespaced"
    assert crd["spec"]["names"] == {"plural": "widgets", "singular": "widget", "kind": "Widget"}
    version = _version(crd)
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)
    assert version["subresources"] == {"status": {}}
    assert version["schema"]["openAPIV3Schema"] == {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer", "minimum": 0}}},
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string", "enum": ["Pending", "Ready"]}},
            },
        },
    }


def test_simple_crd_without_status_or_spec() -> None:
    version = _version(simple_crd("example.dev", "Thing"))
    assert "subresources" not in version
    assert version["schema"]["openAPIV3Schema"]["properties"] == {
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    }
    assert _version(simple_crd("example.dev", "Thing", status={}))["subresources"] == {"status": {}}


def test_simple_crd_scale_subresource() -> None:
    plain = _version(simple_crd("example.dev", "Set", status={}, scale=ScaleSpec()))
    assert plain["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
    }
    selector = ScaleSpec(".spec.size", ".status.size", ".status.selector")
    scaled = _version(simple_crd("example.dev", "Set", status={}, scale=selector))
    assert scaled["subresources"]["scale"] == {
        "specReplicasPath": ".spec.size",
        "statusReplicasPath": ".status.size",
        "labelSelectorPath": ".status.selector",
    }


def test_simple_crd_copies_its_schemas() -> None:
    size: dict[str, Any] = {"type": "integer"}
    crd = simple_crd("example.dev", "Widget", spec={"size": size})
    size["minimum"] = 0
    assert _version(crd)["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"] == {
        "size": {"type": "integer"}
    }


def test_simple_crd_rejects_an_unknown_scope() -> None:
    with pytest.raises(ValueError, match="scope"):
        simple_crd("example.dev", "Widget", scope="Global")


def test_resource_of() -> None:
    crd = simple_crd("example.dev", "Index", plural="indices", version="v1beta1", scope="Cluster")
    assert crd["metadata"]["name"] == "indices.example.dev"
    assert resource_of(crd) == Resource(
        "example.dev", "v1beta1", "indices", "Index", namespaced=False
    )
    assert resource_of(crd, "v1beta1").version == "v1beta1"
    with pytest.raises(ValueError, match="v2"):
        resource_of(crd, "v2")
    assert resource_of(simple_crd("example.dev", "Widget")).namespaced


async def test_eventually_waits_for_a_plain_predicate() -> None:
    calls: list[int] = []

    def third_time() -> bool:
        calls.append(1)
        return len(calls) >= 3

    await eventually(third_time, "the third call", interval=0)
    assert len(calls) == 3


async def test_eventually_awaits_an_async_predicate() -> None:
    calls: list[int] = []

    async def third_time() -> bool:
        calls.append(1)
        return len(calls) >= 3

    await eventually(third_time, "the third call", interval=0)
    assert len(calls) == 3


async def test_eventually_names_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match="timed out waiting for: the impossible"):
        await eventually(lambda: False, "the impossible", timeout=0.05)


@pytest.fixture
async def client() -> AsyncIterator[Client]:
    c = Client(ClusterConfig("https://h"))
    yield c
    await c.close()


async def test_new_manager_serves_nothing_and_has_its_own_registry(client: Client) -> None:
    mgr = new_manager(client)
    opts = mgr.options
    assert (opts.metrics_bind_address, opts.health_probe_bind_address) == (None, None)
    assert not opts.handle_signals
    assert opts.registry is not REGISTRY
    assert new_manager(client).options.registry is not opts.registry
    custom = new_manager(client, name="other", health_probe_bind_address="127.0.0.1:0")
    assert (custom.options.name, custom.options.health_probe_bind_address) == (
        "other",
        "127.0.0.1:0",
    )


async def test_running_stops_the_manager_on_exit(client: Client) -> None:
    mgr = new_manager(client)
    async with running(mgr) as task:
        assert not task.done()
    assert task.done()
    assert task.exception() is None


def test_importing_the_helpers_needs_no_pytest() -> None:
    code = "import sys, kubeloop.testing; sys.exit('pytest' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    assert NodeFactory is PluginNodeFactory

"""NodePool, Autoscaler and Instance served as v1alpha1 and v1beta1, the real kube-apiserver
calling the operator's conversion webhook.

The operator runs in-process with ``webhook_bind_address`` on 127.0.0.1 and certificates
from :func:`~kubeloop.generate_serving_certificates`; the three CRDs are replaced by
``nodepool_served_as_v1beta1`` and its two siblings with ``url`` (the apiserver cannot reach
a Service here, as in controller-runtime's envtest) and the CA as ``caBundle``, and put back
as config/crd has them afterwards (v1alpha1 stays the storage version, so nothing stored
needs migrating back).
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from kubeloop import CRDS, ApiError, Resource
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import (
    AUTOSCALER,
    AUTOSCALER_CONVERSION_PATH,
    AUTOSCALERS,
    BETA_FIELDS,
    INSTANCE,
    INSTANCE_CONVERSION_PATH,
    INSTANCES,
    NODEPOOL,
    NODEPOOL_CONVERSION_PATH,
    NODEPOOLS,
    VERSION,
    autoscaler_served_as_v1beta1,
    instance_served_as_v1beta1,
    nodepool_served_as_v1beta1,
)
from nodepool_operator.crdinstall import install_crds
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.webhooks import kubectl, serve_webhooks

pytestmark = pytest.mark.integration

BETA_NODEPOOLS: Resource = nodepool_served_as_v1beta1({}).resource("v1beta1")
BETA_AUTOSCALERS: Resource = autoscaler_served_as_v1beta1({}).resource("v1beta1")
BETA_INSTANCES: Resource = instance_served_as_v1beta1({}).resource("v1beta1")


@dataclass
class Converting:
    """The operator serving the conversion, the two-version CRD installed."""

    env: OperatorEnv
    cp: ControlPlane

    client_config: dict[str, str]

    async def kubectl(
        self, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return await kubectl(self.cp, *args, stdin=stdin)

    async def stored_versions(self) -> list[str]:
        crd = await self.env.client.get(CRDS, NODEPOOL.name)
        return list(crd["status"]["storedVersions"])

    async def migrate(self, version: str) -> dict[str, str]:
        """docs/versions.md's storage-version migration, to ``version``: the CRD stores it,
        every NodePool is read and written back, and only it stays in storedVersions.
        Returns each pool's resourceVersion after its rewrite."""
        crd = replace(nodepool_served_as_v1beta1(self.client_config), storage=version)
        await install_crds(self.env.client, [crd.definition()])
        plural = f"nodepools.{version}.kubeloop.dev"
        for _ in range(5):  # a conflict: the object was written (so re-encoded) meanwhile
            listed = await self.kubectl("get", plural, "-o", "json")
            assert listed.returncode == 0, listed.stderr
            replaced = await self.kubectl("replace", stdin=listed.stdout)
            if replaced.returncode == 0:
                break
        assert replaced.returncode == 0, replaced.stderr
        patched = await self.kubectl(
            "patch", "crd", NODEPOOL.name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"storedVersions": [version]}}),
        )  # fmt: skip
        assert patched.returncode == 0, patched.stderr
        after = json.loads((await self.kubectl("get", plural, "-o", "json")).stdout)
        return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in after["items"]}


@pytest.fixture
async def converting(
    operator_env: OperatorEnv, kube_control_plane: ControlPlane, tmp_path: Path
) -> AsyncIterator[Converting]:
    env = operator_env
    mgr, ca = await serve_webhooks(env, tmp_path / "certs")
    assert mgr.webhooks is not None
    assert NODEPOOL_CONVERSION_PATH in mgr.webhooks.paths
    client_config = {
        "url": mgr.webhooks.url(NODEPOOL_CONVERSION_PATH),
        "caBundle": base64.b64encode(ca.cert_pem).decode(),
    }
    scalers_config = {**client_config, "url": mgr.webhooks.url(AUTOSCALER_CONVERSION_PATH)}
    vms_config = {**client_config, "url": mgr.webhooks.url(INSTANCE_CONVERSION_PATH)}
    await install_crds(
        env.client,
        [
            nodepool_served_as_v1beta1(client_config).definition(),
            autoscaler_served_as_v1beta1(scalers_config).definition(),
            instance_served_as_v1beta1(vms_config).definition(),
        ],
    )
    probe = f"probe-{env.run_id}"
    await env.create(NODEPOOLS, factories.nodepool(probe))
    await env.create(AUTOSCALERS, factories.autoscaler(probe, pool=probe, namespaces=["default"]))

    async def converted() -> bool:
        # the apiserver loads the CRDs' new conversion stanzas a moment after they are written
        try:
            await env.client.get(BETA_NODEPOOLS, probe)
            await env.client.get(BETA_AUTOSCALERS, probe)
            await env.client.list(BETA_INSTANCES, "default")
        except ApiError:
            return False
        return True

    converting = Converting(env, kube_control_plane, client_config)
    try:
        await env.eventually(converted, "the apiserver to call the conversion webhook", 30)
        yield converting
    finally:
        if await converting.stored_versions() != [VERSION]:  # a migration test failed midway
            await converting.migrate(VERSION)
        restored = [NODEPOOL.definition(), AUTOSCALER.definition(), INSTANCE.definition()]
        await install_crds(env.client, restored)


def full_pool(env: OperatorEnv, name: str) -> dict[str, Any]:
    pool = factories.nodepool(
        name,
        target=2,
        max_nodes=4,
        labels={"team": "ml"},
        cpu="4",
        diskSize="50Gi",
        taints=[{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}],
    )
    pool["metadata"]["annotations"] = {"example.com/owner": "ml-platform"}
    return env.labelled(pool)


async def test_a_nodepool_created_as_v1alpha1_reads_back_as_v1beta1(
    converting: Converting,
) -> None:
    env = converting.env
    name = f"conv-{env.run_id}"
    created = await env.create(NODEPOOLS, full_pool(env, name))

    beta = await env.client.get(BETA_NODEPOOLS, name)
    assert beta["apiVersion"] == "kubeloop.dev/v1beta1"
    spec = beta["spec"]
    assert spec["size"] == {"target": 2, "min": 0, "max": 4}
    assert spec["template"]["metadata"] == {"labels": {"team": "ml"}}
    template = spec["template"]["spec"]
    assert template["instanceType"] == "m5.large"
    assert template["capacity"] == {"cpu": "4", "disk": "50Gi"}
    assert template["taints"] == [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
    assert spec.get("disruption") == created["spec"].get("disruption")
    assert not {"targetNodes", "minNodes", "maxNodes", "instanceType", "labels"} & set(spec)
    assert beta["metadata"]["annotations"] == {"example.com/owner": "ml-platform"}
    assert beta["metadata"]["uid"] == created["metadata"]["uid"]

    # kubectl, naming the version, shows the same object
    shown = await converting.kubectl("get", f"nodepools.v1beta1.kubeloop.dev/{name}", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["spec"] == spec

    # and back as v1alpha1, exactly as created
    alpha = await env.client.get(NODEPOOLS, name)
    assert alpha["spec"] == created["spec"]
    assert alpha["metadata"]["annotations"] == created["metadata"]["annotations"]


async def test_a_write_through_v1beta1_loses_nothing(converting: Converting) -> None:
    """Read as v1beta1, change the target, write it back: stored as v1alpha1, every other
    field (and the user's annotations) as it was."""
    env = converting.env
    name = f"rw-{env.run_id}"
    created = await env.create(NODEPOOLS, full_pool(env, name))
    beta = await env.client.get(BETA_NODEPOOLS, name)
    beta["spec"]["size"]["target"] = 3
    beta["spec"]["template"]["metadata"]["labels"]["tier"] = "gold"
    updated = await env.client.update(BETA_NODEPOOLS, beta)
    assert updated["apiVersion"] == "kubeloop.dev/v1beta1"
    assert updated["spec"]["size"]["target"] == 3

    alpha = await env.client.get(NODEPOOLS, name)
    want = copy.deepcopy(created["spec"])
    want["targetNodes"] = 3
    want["labels"] = {"team": "ml", "tier": "gold"}
    assert alpha["spec"] == want
    assert alpha["metadata"]["annotations"] == {"example.com/owner": "ml-platform"}
    assert alpha["metadata"]["generation"] == created["metadata"]["generation"] + 1

    # created as v1beta1, stored and read as v1alpha1
    fresh = copy.deepcopy(beta)
    fresh["metadata"] = {"name": f"{name}-b", "labels": beta["metadata"]["labels"]}
    created_beta = await env.create(BETA_NODEPOOLS, fresh)
    assert created_beta["spec"] == fresh["spec"]
    stored = await env.client.get(NODEPOOLS, f"{name}-b")
    assert stored["spec"] == want


async def test_a_list_converts_in_either_version(converting: Converting) -> None:
    env = converting.env
    names = [f"ls{i}-{env.run_id}" for i in range(3)]
    for i, name in enumerate(names):
        await env.create(NODEPOOLS, env.labelled(factories.nodepool(name, target=i)))
    selector = ",".join(f"{k}={v}" for k, v in env.labels.items())
    for res, target in ((BETA_NODEPOOLS, ("size", "target")), (NODEPOOLS, ("targetNodes",))):
        listed = await env.client.list(res, label_selector=selector)
        items = sorted(
            (i for i in listed["items"] if i["metadata"]["name"] in names),
            key=lambda i: i["metadata"]["name"],
        )
        assert [i["apiVersion"] for i in items] == [res.api_version] * 3
        got = []
        for item in items:
            value: Any = item["spec"]
            for key in target:
                value = value[key]
            got.append(value)
        assert got == [0, 1, 2]


async def test_a_conversion_error_is_a_clear_message(converting: Converting) -> None:
    """A v1alpha1 pool whose carried-over v1beta1 fields are not JSON cannot be read as
    v1beta1: the apiserver passes on our message naming the object and the annotation; as
    v1alpha1 (no conversion) it still reads."""
    env = converting.env
    name = f"bad-{env.run_id}"
    pool = env.labelled(factories.nodepool(name))
    pool["metadata"]["annotations"] = {BETA_FIELDS: "{not json"}
    await env.create(NODEPOOLS, pool)
    with pytest.raises(ApiError) as err:
        await env.client.get(BETA_NODEPOOLS, name)
    assert err.value.status_code == 500
    assert f"converting NodePool /{name} to kubeloop.dev/v1beta1" in err.value.message
    assert f"annotation {BETA_FIELDS} is not JSON" in err.value.message
    shown = await converting.kubectl("get", f"nodepools.v1beta1.kubeloop.dev/{name}")
    assert shown.returncode == 1
    assert f"annotation {BETA_FIELDS} is not JSON" in shown.stderr
    assert (await env.client.get(NODEPOOLS, name))["metadata"]["name"] == name


async def test_the_storage_version_migration_moves_every_pool_and_back(
    converting: Converting,
) -> None:
    """docs/versions.md's steps, against the apiserver: after the CRD stores v1beta1, writing
    each pool back unchanged re-encodes it (its resourceVersion moves, which an unchanged
    write in the same storage version does not do), and storedVersions can then drop
    v1alpha1. The same steps take it back."""
    env = converting.env
    names = [f"mig{i}-{env.run_id}" for i in range(2)]
    for name in names:
        await env.create(NODEPOOLS, env.labelled(factories.nodepool(name, target=1)))
    before = {n: (await env.client.get(NODEPOOLS, n))["metadata"]["resourceVersion"] for n in names}

    # an unchanged write in the storage version it is already in writes nothing
    same = await converting.kubectl(
        "get", f"nodepools.{VERSION}.kubeloop.dev", names[0], "-o", "json"
    )
    assert (await converting.kubectl("replace", stdin=same.stdout)).returncode == 0
    unchanged = await env.client.get(NODEPOOLS, names[0])
    assert unchanged["metadata"]["resourceVersion"] == before[names[0]]

    moved = await converting.migrate("v1beta1")
    assert await converting.stored_versions() == ["v1beta1"]
    for name in names:
        assert int(moved[name]) > int(before[name]), f"{name} was not rewritten"
        pool = await env.client.get(NODEPOOLS, name)  # still read as v1alpha1, converted
        assert (pool["spec"]["targetNodes"], pool["spec"]["instanceType"]) == (1, "m5.large")

    back = await converting.migrate(VERSION)
    assert await converting.stored_versions() == [VERSION]
    for name in names:
        assert int(back[name]) > int(moved[name]), f"{name} was not rewritten back"


async def test_an_autoscaler_created_as_v1alpha1_reads_back_as_v1beta1(
    converting: Converting,
) -> None:
    """Its scale-down settings grouped in v1beta1; a write through v1beta1 stored as
    v1alpha1 with nothing else changed."""
    env = converting.env
    name = f"as-{env.run_id}"
    scaler = factories.autoscaler(
        name, pool=name, namespaces=["default"], scaleDownEnabled=True, maxNodes=3
    )
    created = await env.create(AUTOSCALERS, scaler)
    beta = await env.client.get(BETA_AUTOSCALERS, name)
    assert beta["apiVersion"] == "kubeloop.dev/v1beta1"
    assert beta["spec"]["scaleDown"] == {
        "enabled": True,
        "unneededTime": created["spec"]["scaleDownUnneededTime"],
    }
    assert not {"scaleDownEnabled", "scaleDownUnneededTime"} & set(beta["spec"])
    assert (beta["spec"]["nodePoolRef"], beta["spec"]["maxNodes"]) == ({"name": name}, 3)
    shown = await converting.kubectl(
        "get", f"autoscalers.v1beta1.kubeloop.dev/{name}", "-o", "json"
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["spec"] == beta["spec"]

    beta["spec"]["scaleDown"]["enabled"] = False
    await env.client.update(BETA_AUTOSCALERS, beta)
    alpha = await env.client.get(AUTOSCALERS, name)
    assert alpha["spec"] == {**created["spec"], "scaleDownEnabled": False}


async def test_an_instance_created_as_v1alpha1_reads_back_as_v1beta1(
    converting: Converting,
) -> None:
    env = converting.env
    name = f"vm-{env.run_id}"
    vm = factories.instance(name, namespace="default", image="ami-0abcdef1234567890")
    created = await env.create(INSTANCES, env.labelled(vm), "default")
    beta = await env.client.get(BETA_INSTANCES, name, "default")
    assert beta["spec"] == {"imageId": "ami-0abcdef1234567890", "instanceType": "m5.large"}
    beta["spec"]["instanceType"] = "m5.xlarge"
    await env.client.update(BETA_INSTANCES, beta)
    alpha = await env.client.get(INSTANCES, name, "default")
    assert alpha["spec"] == {**created["spec"], "instanceType": "m5.xlarge"}


async def test_kubectl_scale_through_v1beta1_sets_the_stored_target(
    converting: Converting,
) -> None:
    """v1beta1's scale subresource is at .spec.size.target; through it, the stored
    v1alpha1 targetNodes moves (what an HPA or `kubectl scale` speaking v1beta1 does)."""
    env = converting.env
    name = f"sc-{env.run_id}"
    await env.create(NODEPOOLS, env.labelled(factories.nodepool(name, target=1, max_nodes=5)))
    scaled = await converting.kubectl(
        "scale", f"nodepools.v1beta1.kubeloop.dev/{name}", "--replicas=4"
    )
    assert scaled.returncode == 0, scaled.stderr
    assert (await env.client.get(NODEPOOLS, name))["spec"]["targetNodes"] == 4
    # past size.max: the v1beta1 rule refuses it, naming its own field
    refused = await converting.kubectl(
        "scale", f"nodepools.v1beta1.kubeloop.dev/{name}", "--replicas=6"
    )
    assert refused.returncode == 1
    assert "spec.size.target: Invalid value" in refused.stderr
    assert (await env.client.get(NODEPOOLS, name))["spec"]["targetNodes"] == 4

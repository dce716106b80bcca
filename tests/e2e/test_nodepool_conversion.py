"""NodePool, Autoscaler and Instance served as v1alpha1 and v1beta1, the real kube-apiserver
calling the operator's conversion webhook.

The operator runs in-process with ``webhook_bind_address`` on 127.0.0.1 and certificates
from :func:`~kubeloop.generate_serving_certificates`; the three CRDs are replaced by
``nodepool_served_as_v1beta1`` and its two siblings with ``url`` (the apiserver cannot reach
a Service here, as in controller-runtime's envtest) and the CA as ``caBundle``. They store
v1beta1, as config/default's do; afterwards every object is migrated back to v1alpha1 (the
steps of docs/versions.md) and the CRDs put back as config/crd has them.

Which version an object is stored in is read without etcd: with the CRD's conversion pointed
at a port nobody serves, only the stored version reads (the apiserver calls the webhook only
for an object not already in the version asked for).
"""

from __future__ import annotations

import asyncio
import base64
import copy
import functools
import json
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from kubeloop import CRDS, ApiError, Registry, Resource
from kubeloop.crd import CustomResource
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import (
    ALPHA_FIELDS,
    AUTOSCALER,
    AUTOSCALER_CONVERSION_PATH,
    AUTOSCALERS,
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
from nodepool_operator.operator import build_manager
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import pool_gone
from tests.e2e.webhooks import kubectl, serve_webhooks

pytestmark = pytest.mark.integration

BETA_NODEPOOLS: Resource = nodepool_served_as_v1beta1({}).resource("v1beta1")
BETA_AUTOSCALERS: Resource = autoscaler_served_as_v1beta1({}).resource("v1beta1")
BETA_INSTANCES: Resource = instance_served_as_v1beta1({}).resource("v1beta1")
BETA = "v1beta1"
#: the label of the pools the lone operator of one test reconciles
LONE = "e2e.kubeloop.dev/lone"
#: docs/versions.md's patch moving a two-version CRD's storage back to v1alpha1
STORE_V1ALPHA1 = [
    {"op": "test", "path": "/spec/versions/0/name", "value": "v1alpha1"},
    {"op": "replace", "path": "/spec/versions/0/storage", "value": True},
    {"op": "replace", "path": "/spec/versions/1/storage", "value": False},
]
#: Each converted kind's two-version CRD, by the config its conversion calls.
Served = Callable[[Mapping[str, Any]], CustomResource]


@dataclass
class Converting:
    """The operator serving the conversion, the two-version CRD installed."""

    env: OperatorEnv
    cp: ControlPlane

    client_config: dict[str, str]
    #: the kinds converted, each with its two-version CRD and the config of its webhook
    kinds: tuple[tuple[CustomResource, Served, dict[str, str]], ...] = ()
    #: a pool created with the CRDs, readable in both versions while the webhook answers
    probe: str = ""

    async def kubectl(
        self, *args: str, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return await kubectl(self.cp, *args, stdin=stdin)

    async def stored_versions(self, kind: CustomResource = NODEPOOL) -> list[str]:
        crd = await self.env.client.get(CRDS, kind.name)
        return list(crd["status"]["storedVersions"])

    async def migrate(self, version: str, kind: CustomResource = NODEPOOL) -> dict[str, str]:
        """docs/versions.md's storage-version migration of ``kind``, to ``version``: the CRD
        stores it, every object is read and written back, and only it stays in
        storedVersions. Returns each object's resourceVersion after its rewrite."""
        [(_, served, config)] = [k for k in self.kinds if k[0] == kind]
        if version == BETA:  # the upgrade applies the default CRDs
            await install_crds(self.env.client, [served(config).definition()])
        else:  # the way back flips the flag in place, as docs/versions.md types it
            flipped = await self.kubectl(
                "patch", "crd", kind.name, "--type=json", "-p", json.dumps(STORE_V1ALPHA1)
            )
            assert flipped.returncode == 0, flipped.stderr
        if kind == NODEPOOL:
            await self.settle()
        plural = f"{kind.plural}.{version}.kubeloop.dev"
        for _ in range(5):  # a conflict: the object was written (so re-encoded) meanwhile
            listed = await self.kubectl("get", plural, "-A", "-o", "json")
            assert listed.returncode == 0, listed.stderr
            replaced = await self.kubectl("replace", stdin=listed.stdout)  # an empty List too
            if replaced.returncode == 0:
                break
        else:
            raise AssertionError(f"rewriting {plural}: {replaced.stderr}")
        patched = await self.kubectl(
            "patch", "crd", kind.name, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"storedVersions": [version]}}),
        )  # fmt: skip
        assert patched.returncode == 0, patched.stderr
        after = json.loads((await self.kubectl("get", plural, "-A", "-o", "json")).stdout)
        return {i["metadata"]["name"]: i["metadata"]["resourceVersion"] for i in after["items"]}

    async def settle(self) -> None:
        """Wait until the apiserver serves NodePools by the CRD just written: it rebuilds its
        handler for a kind after a CRD update, and a write right after the update may still be
        stored by the handler before. ``stored_as`` waits for reads through a later CRD (the
        dead address, then the webhook again), so afterwards every write uses the new one."""
        await self.stored_as([self.probe])

    async def stored_as(self, names: list[str]) -> dict[str, str]:
        """The version each NodePool in ``names`` is stored in, read without etcd: with the
        CRD's conversion pointed at a port nobody serves, only that version reads. The probe
        pool's reads show when the apiserver has the dead address (one version fails); the
        conversion is put back after."""
        env = self.env
        storage = (await env.client.get(CRDS, NODEPOOL.name))["spec"]["versions"]
        stores = next(v["name"] for v in storage if v["storage"])
        dead = {**self.client_config, "url": f"https://127.0.0.1:{free_port()}/convert"}
        crd = replace(nodepool_served_as_v1beta1(dead), storage=stores)
        await install_crds(env.client, [crd.definition()])

        async def readable(name: str) -> list[str]:
            ok = []
            for res in (NODEPOOLS, BETA_NODEPOOLS):
                try:
                    await env.client.get(res, name)
                except ApiError:
                    continue
                ok.append(res.version)
            return ok

        try:
            await env.eventually(
                lambda: _one(readable(self.probe)), "the apiserver to call the dead address", 30
            )
            found = {name: await readable(name) for name in names}
        finally:
            back = replace(nodepool_served_as_v1beta1(self.client_config), storage=stores)
            await install_crds(env.client, [back.definition()])
            await env.eventually(
                lambda: _both(readable(self.probe)), "the webhook to convert again", 30
            )
        for name, versions in found.items():
            assert len(versions) == 1, f"{name} read as {versions} with no webhook"
        return {name: versions[0] for name, versions in found.items()}


async def _one(versions: Any) -> bool:
    return len(await versions) == 1


async def _both(versions: Any) -> bool:
    return len(await versions) == 2


def free_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


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
    kinds = (
        (NODEPOOL, nodepool_served_as_v1beta1, client_config),
        (AUTOSCALER, autoscaler_served_as_v1beta1, scalers_config),
        (INSTANCE, instance_served_as_v1beta1, vms_config),
    )
    await install_crds(env.client, [served(config).definition() for _, served, config in kinds])
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

    converting = Converting(env, kube_control_plane, client_config, kinds, probe)
    try:
        await env.eventually(converted, "the apiserver to call the conversion webhook", 30)
        yield converting
    finally:
        # what the tests stored as v1beta1 goes back to v1alpha1, which config/crd's CRDs
        # (the other tests') serve alone: docs/versions.md's way back
        for kind, _, _ in kinds:
            if await converting.stored_versions(kind) != [VERSION]:
                await converting.migrate(VERSION, kind)
        await install_crds(env.client, [kind.definition() for kind, _, _ in kinds])


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
    """Read as v1beta1, change the target, write it back: read as v1alpha1, every other
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

    # created as v1beta1, read as v1alpha1
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


async def test_a_stash_annotation_not_json_fails_no_read(converting: Converting) -> None:
    """A pool stored as v1beta1 whose carried-over v1alpha1 fields annotation is not JSON
    still reads as v1alpha1, the controllers' version, alone and in a list, the annotation
    kept as written: a conversion that failed would stop every list and watch of the kind."""
    env = converting.env
    name = f"bad-{env.run_id}"
    probe = await env.client.get(BETA_NODEPOOLS, converting.probe)
    pool = {
        "apiVersion": probe["apiVersion"],
        "kind": "NodePool",
        "metadata": {"name": name, "annotations": {ALPHA_FIELDS: "{not json"}},
        "spec": probe["spec"],
    }
    await env.create(BETA_NODEPOOLS, pool)
    alpha = await env.client.get(NODEPOOLS, name)
    assert alpha["metadata"]["annotations"] == {ALPHA_FIELDS: "{not json"}
    assert alpha["spec"]["instanceType"] == "m5.large"
    selector = ",".join(f"{k}={v}" for k, v in env.labels.items())
    listed = await env.client.list(NODEPOOLS, label_selector=selector)
    assert name in {i["metadata"]["name"] for i in listed["items"]}


async def test_a_pool_created_as_v1alpha1_is_stored_as_v1beta1(converting: Converting) -> None:
    """The default two-version CRDs store v1beta1: storedVersions says so, and with no
    webhook answering the pool reads as v1beta1 only."""
    env = converting.env
    name = f"st-{env.run_id}"
    await env.create(NODEPOOLS, env.labelled(factories.nodepool(name, target=1)))
    assert await converting.stored_versions() == [VERSION, BETA]  # v1alpha1: config/crd's
    stored = await converting.stored_as([name, converting.probe])
    assert stored == {name: BETA, converting.probe: BETA}


async def test_the_migration_from_an_install_that_stored_v1alpha1(
    converting: Converting,
) -> None:
    """docs/versions.md's upgrade, against the apiserver: pools stored as v1alpha1 (by the
    release before) stay so when the default CRDs are applied, until each is written back;
    then storedVersions can drop v1alpha1. The way back (before config/crd's CRDs again)
    is the same steps to v1alpha1."""
    env = converting.env
    await converting.migrate(VERSION)  # the release before: v1alpha1 stored, and only it
    assert await converting.stored_versions() == [VERSION]
    names = [f"mig{i}-{env.run_id}" for i in range(2)]
    for name in names:
        await env.create(NODEPOOLS, env.labelled(factories.nodepool(name, target=1)))
    old = [*names, converting.probe]
    assert await converting.stored_as(old) == dict.fromkeys(old, VERSION)

    # the upgrade applies the default CRDs: new writes are stored as v1beta1, the rest waits
    default = nodepool_served_as_v1beta1(converting.client_config)
    await install_crds(env.client, [default.definition()])
    await converting.settle()
    new = f"new-{env.run_id}"
    await env.create(NODEPOOLS, env.labelled(factories.nodepool(new, target=1)))
    assert await converting.stored_versions() == [VERSION, BETA]
    assert await converting.stored_as([*old, new]) == {**dict.fromkeys(old, VERSION), new: BETA}
    before = {n: (await env.client.get(NODEPOOLS, n))["metadata"]["resourceVersion"] for n in names}

    moved = await converting.migrate(BETA)
    assert await converting.stored_versions() == [BETA]
    for name in names:
        assert int(moved[name]) > int(before[name]), f"{name} was not rewritten"
        pool = await env.client.get(NODEPOOLS, name)  # still read as v1alpha1, converted
        assert (pool["spec"]["targetNodes"], pool["spec"]["instanceType"]) == (1, "m5.large")
    assert await converting.stored_as([*old, new]) == dict.fromkeys([*old, new], BETA)
    # the same steps for the two other kinds (the fixture's probe Autoscaler among them)
    for kind in (AUTOSCALER, INSTANCE):
        await converting.migrate(BETA, kind)
        assert await converting.stored_versions(kind) == [BETA]

    back = await converting.migrate(VERSION)
    assert await converting.stored_versions() == [VERSION]
    for name in names:
        assert int(back[name]) > int(moved[name]), f"{name} was not rewritten back"
    assert await converting.stored_as([*old, new]) == dict.fromkeys([*old, new], VERSION)


async def test_a_lone_operator_reads_pools_stored_as_v1beta1_through_its_own_webhook(
    converting: Converting, tmp_path: Path
) -> None:
    """The controllers read v1alpha1, so with v1beta1 stored each of their reads needs the
    conversion webhook, which a lone replica serves itself: started against a pool nothing
    can convert yet, it serves the webhook, syncs, and writes the status of that pool and of
    one created as v1alpha1 (stored as v1beta1 through it)."""
    env = converting.env
    port = free_port()
    url = f"https://127.0.0.1:{port}{NODEPOOL_CONVERSION_PATH}"
    own = nodepool_served_as_v1beta1({**converting.client_config, "url": url})
    await install_crds(env.client, [own.definition()])

    async def unconvertible() -> bool:
        try:
            await env.client.get(NODEPOOLS, converting.probe)
        except ApiError:
            return True
        return False

    await env.eventually(unconvertible, "the apiserver to call the operator's port", 30)
    name, later = f"own-{env.run_id}", f"own2-{env.run_id}"
    spec = (await env.client.get(BETA_NODEPOOLS, converting.probe))["spec"]
    beta = {
        "apiVersion": BETA_NODEPOOLS.api_version,
        "kind": "NodePool",
        "metadata": {"name": name, "labels": {LONE: env.run_id}},
        "spec": {**spec, "size": {"target": 0, "max": 3}},
    }
    await env.create(BETA_NODEPOOLS, beta)
    with pytest.raises(ApiError):  # read as the operator reads it: nothing converts it yet
        await env.client.get(NODEPOOLS, name)

    settings = replace(
        env.settings,
        webhook_bind_address=f"127.0.0.1:{port}",
        webhook_cert_dir=tmp_path / "certs",
        # these two pools only: the fixture's probe must not get a finalizer of this operator
        label_selector=f"{LONE}={env.run_id}",
    )
    mgr = build_manager(
        env.client, env.cloud, settings, registry=Registry(), controllers=("nodepool",)
    )
    task = asyncio.create_task(mgr.run())
    try:

        async def created_later() -> bool:
            try:
                pool = factories.nodepool(later, target=0)
                pool.setdefault("metadata", {})["labels"] = {LONE: env.run_id}
                await env.create(NODEPOOLS, pool)
            except ApiError:  # its webhook not listening yet
                return False
            return True

        async def observed() -> bool:
            for pool_name in (name, later):
                got = await env.client.get(BETA_NODEPOOLS, pool_name)
                status = got.get("status") or {}
                if status.get("observedGeneration") != got["metadata"]["generation"]:
                    return False
            return True

        await env.eventually(created_later, "a pool created as v1alpha1 through it", 30)
        await env.eventually(observed, "the operator to write both pools' status", 60)
        assert await converting.stored_versions() == [VERSION, BETA]
        # delete while the operator runs: its finalizer goes with it
        for pool_name in (name, later):
            await env.client.delete(NODEPOOLS, pool_name)
            await env.eventually(
                functools.partial(pool_gone, env, pool_name), f"{pool_name} deleted", 30
            )
    finally:
        mgr.stop()
        await asyncio.wait_for(task, 30)
        default = nodepool_served_as_v1beta1(converting.client_config)
        await install_crds(env.client, [default.definition()])


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
        "consolidation": True,
    }
    assert not {
        "scaleDownEnabled",
        "scaleDownUnneededTime",
        "scaleDownConsolidation",
    } & set(beta["spec"])
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
    """v1beta1's scale subresource is at .spec.size.target; through it, v1alpha1's
    targetNodes moves (what an HPA or `kubectl scale` speaking v1beta1 does)."""
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

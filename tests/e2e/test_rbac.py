"""The operator under its own RBAC (config/rbac/) against the real apiserver: no request refused.

The ClusterRole, the leader-election Role and their bindings are created from the YAML files,
bound to a client-certificate user instead of the ServiceAccount, and the operator runs with
that user's client through a scenario that touches every resource it uses: a NodePool scaled
0 -> 2 -> 1, an Autoscaler raising a pool for a pending pod (with a ConfigMap and a claim to look
up), an Instance launched and deleted, the pools deleted, a Lease taken and released in
nodepool-system (created if missing, and left in place). A request observer on the client
counts every answer; the test asserts there is no 403 among them.

Before the binding exists the same client is refused (so the count can fail), and after it, a
set of SelfSubjectAccessReviews checks what the role must *not* allow.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import functools
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop import (
    CONFIGMAPS,
    CRDS,
    LEASES,
    NAMESPACES,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PODS,
    AlreadyExists,
    Client,
    Forbidden,
    Manager,
    NotFound,
    Object,
    Resource,
    load_incluster,
)
from kubeloop._resource import CLUSTERROLEBINDINGS, CLUSTERROLES, ROLEBINDINGS, ROLES
from kubeloop.envtest import ControlPlane
from nodepool_operator.__main__ import _parser
from nodepool_operator.api import AUTOSCALERS, INSTANCES, NODEPOOLS, crds
from nodepool_operator.controllers._blocked import PDBS
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.crdinstall import install_crds
from nodepool_operator.operator import FIELD_MANAGER, build_manager
from tests import factories
from tests.e2e.conftest import OperatorEnv

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "config" / "rbac"
DEPLOYMENT = ROOT / "config" / "manager" / "deployment.yaml"
SERVICE_ACCOUNT = {"kind": "ServiceAccount", "name": "nodepool-operator"}
NAMESPACE = "nodepool-system"
#: The Lease build_manager asks for, and its namespace: the operator's own (the pod's, in a
#: cluster; given with leader_election_namespace here).
LEASE, LEASE_NAMESPACE = "nodepool-operator-leader", NAMESPACE
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
SSAR = Resource(
    "authorization.k8s.io",
    "v1",
    "selfsubjectaccessreviews",
    "SelfSubjectAccessReview",
    namespaced=False,
)
RBAC_KINDS = {
    "ClusterRole": CLUSTERROLES,
    "ClusterRoleBinding": CLUSTERROLEBINDINGS,
    "Role": ROLES,
    "RoleBinding": ROLEBINDINGS,
}

#: (apiGroup, resource[/subresource], verb) the operator's ClusterRole grants: the golden list.
OPERATOR_GRANTS = {
    *(("kubeloop.dev", "nodepools", v) for v in ("get", "list", "watch", "patch")),
    ("kubeloop.dev", "nodepools/status", "update"),
    ("kubeloop.dev", "nodepools/scale", "get"),
    ("kubeloop.dev", "nodepools/scale", "update"),
    *(("kubeloop.dev", "autoscalers", v) for v in ("get", "list", "watch")),
    ("kubeloop.dev", "autoscalers/status", "update"),
    *(("kubeloop.dev", "instances", v) for v in ("get", "list", "watch", "patch")),
    ("kubeloop.dev", "instances/status", "update"),
    *(("kubeloop.dev", "awsnodeclasses", v) for v in ("get", "list", "watch")),
    *(("", "nodes", v) for v in ("list", "watch", "patch", "delete")),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods/eviction", "create"),
    ("", "pods/status", "patch"),
    ("apps", "daemonsets", "list"),
    ("apps", "daemonsets", "watch"),
    ("", "configmaps", "get"),
    ("", "persistentvolumeclaims", "get"),
    ("", "persistentvolumes", "get"),
    ("storage.k8s.io", "storageclasses", "get"),
    ("policy", "poddisruptionbudgets", "list"),
    ("events.k8s.io", "events", "create"),
    ("events.k8s.io", "events", "patch"),
}


# -- the manifests ---------------------------------------------------------------------------


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _doc(path: Path, kind: str) -> dict[str, Any]:
    return next(d for d in _docs(path) if d["kind"] == kind)


def _grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def test_the_cluster_role_grants_exactly_the_golden_list() -> None:
    role = _doc(RBAC / "cluster_role.yaml", "ClusterRole")
    assert role["metadata"]["name"] == "nodepool-operator"
    assert _grants(role) == OPERATOR_GRANTS
    assert all("resourceNames" not in rule for rule in role["rules"])
    for rule in role["rules"]:
        for values in (rule["apiGroups"], rule["resources"], rule["verbs"]):
            assert "*" not in values


def test_the_namespaced_and_optional_roles_are_pinned_to_the_operators_objects() -> None:
    lease_role = _doc(RBAC / "leader_election_role.yaml", "Role")
    assert lease_role["metadata"]["namespace"] == LEASE_NAMESPACE
    assert _grants(lease_role) == {
        ("coordination.k8s.io", "leases", v) for v in ("create", "get", "update")
    }
    for rule in lease_role["rules"]:
        # create cannot be restricted by name; everything else is
        assert rule["verbs"] == ["create"] or rule["resourceNames"] == [LEASE]
    installer = _doc(RBAC / "crd_installer_role.yaml", "ClusterRole")
    names = sorted(crd["metadata"]["name"] for crd in crds())
    for rule in installer["rules"]:
        assert rule["verbs"] == ["create"] or sorted(rule["resourceNames"]) == names
    assert _grants(installer) == {
        ("apiextensions.k8s.io", "customresourcedefinitions", v)
        for v in ("create", "get", "update")
    }


def test_every_binding_names_the_operators_service_account() -> None:
    account = _doc(RBAC / "service_account.yaml", "ServiceAccount")
    assert account["metadata"]["name"] == "nodepool-operator"
    assert account["metadata"]["namespace"] == NAMESPACE
    bindings = [
        d
        for f in ("cluster_role_binding.yaml", "leader_election_role_binding.yaml")
        for d in _docs(RBAC / f)
    ] + [_doc(RBAC / "crd_installer_role.yaml", "ClusterRoleBinding")]
    for binding in bindings:
        assert binding["subjects"] == [{**SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    deployment = _doc(DEPLOYMENT, "Deployment")
    assert deployment["metadata"]["namespace"] == NAMESPACE
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "nodepool-operator"


def test_the_lease_rights_are_in_the_namespace_the_deployed_operator_takes_its_lease_in() -> None:
    """The operator takes its Lease in its pod's namespace unless told otherwise."""
    deployment = _doc(DEPLOYMENT, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args: argparse.Namespace = _parser().parse_args(container["args"])
    lease_namespace = args.leader_election_namespace or deployment["metadata"]["namespace"]
    assert lease_namespace == LEASE_NAMESPACE
    role = _doc(RBAC / "leader_election_role.yaml", "Role")
    binding = _doc(RBAC / "leader_election_role_binding.yaml", "RoleBinding")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == LEASE_NAMESPACE
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }
    # The namespace itself is shipped with the Deployment.
    assert _doc(DEPLOYMENT, "Namespace")["metadata"]["name"] == LEASE_NAMESPACE


def test_the_deployment_runs_the_cli_with_leader_election_and_reachable_probes() -> None:
    deployment = _doc(DEPLOYMENT, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["nodepool-operator"]
    args: argparse.Namespace = _parser().parse_args(container["args"])
    assert args.command == "run"
    assert args.leader_elect
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    # on all interfaces (kubeloop binds ":port" to loopback), on the ports the probes use
    assert args.health_probe_bind_address == f"0.0.0.0:{ports['health']}"
    assert args.metrics_bind_address == f"0.0.0.0:{ports['metrics']}"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert container["resources"]["requests"].keys() == {"cpu", "memory"}
    # EC2, as the image's own command: the simulated cloud (a test bed the image does not carry)
    # is not the deployed default, so no cloud state needs a volume
    assert args.cloud == "aws"
    assert not any(arg.startswith("--cloud-state") for arg in container["args"])


def test_the_deployment_connects_as_its_service_account(tmp_path: Path) -> None:
    """No kubeconfig in the pod: the operator falls back to the in-cluster service account."""
    docs = _docs(DEPLOYMENT)
    assert [d["kind"] for d in docs] == ["Namespace", "Deployment"]  # no kubeconfig ConfigMap
    pod = _doc(DEPLOYMENT, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert not any(arg.startswith("--kubeconfig") for arg in container["args"])
    assert _parser().parse_args(container["args"]).kubeconfig is None
    # load_config() reads $KUBECONFIG first: the pod must not set it.
    assert "KUBECONFIG" not in {e["name"] for e in container.get("env", [])}
    # The token is mounted (the ServiceAccount opts out; the pod opts back in), and nothing
    # is mounted over it.
    account = _doc(RBAC / "service_account.yaml", "ServiceAccount")
    assert account["automountServiceAccountToken"] is False
    assert pod["automountServiceAccountToken"] is True
    mounts = [m["mountPath"] for m in container["volumeMounts"]]
    assert not any(SERVICE_ACCOUNT_DIR.startswith(m.rstrip("/") + "/") for m in mounts)
    assert SERVICE_ACCOUNT_DIR not in mounts
    assert {v["name"] for v in pod["volumes"]} == {m["name"] for m in container["volumeMounts"]}
    # What the kubelet mounts there resolves to the pod's own identity.
    (tmp_path / "ca.crt").write_text("ca")
    (tmp_path / "token").write_text("token")
    (tmp_path / "namespace").write_text(NAMESPACE)
    environ = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    config = load_incluster(root=tmp_path, environ=environ)
    assert config.server == "https://10.96.0.1:443"
    assert config.token_file == tmp_path / "token"
    assert config.ca_data == b"ca"
    assert config.namespace == NAMESPACE


def test_the_deployment_runs_a_standby_and_rolls_without_downtime() -> None:
    """Two replicas under leader election; a RollingUpdate that keeps both ready (a standby
    passes /readyz, so the new pod's readiness does not wait for the Lease)."""
    spec = _doc(DEPLOYMENT, "Deployment")["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    (container,) = spec["template"]["spec"]["containers"]
    assert _parser().parse_args(container["args"]).leader_elect


# -- the identity the operator runs as ---------------------------------------------------------


@dataclass
class Requests:
    """Every answered API request of a client: (verb, resource, subresource, status code)."""

    seen: list[tuple[str, str, str, int]] = field(default_factory=list)

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        self.seen.append((verb, resource.key if resource else "", subresource or "", code))

    def refused(self) -> list[tuple[str, str, str, int]]:
        return [r for r in self.seen if r[3] == 403]

    def authorized(self) -> set[tuple[str, str, str]]:
        """Requests the apiserver let through (answered, and neither 401 nor 403)."""
        return {(v, r, s) for v, r, s, code in self.seen if code and code not in (401, 403)}


@dataclass
class Identity:
    """A client-certificate user with no rights until :meth:`grant` binds roles to it."""

    admin: Client
    user: str
    kubeconfig: Path
    suffix: str
    created: list[tuple[Resource, str, str | None]] = field(default_factory=list)

    async def grant(self, *files: str) -> None:
        """Create the roles and bindings of ``files`` (under config/rbac/), each name suffixed
        and every binding's subject replaced by this user."""
        for name in files:
            for doc in _docs(RBAC / name):
                obj = self._bound(doc)
                res = RBAC_KINDS[obj["kind"]]
                namespace = obj["metadata"].get("namespace")
                if namespace is not None:
                    await _ensure_namespace(self.admin, namespace)
                await self.admin.create(res, obj, namespace)
                self.created.append((res, obj["metadata"]["name"], namespace))

    def _bound(self, doc: dict[str, Any]) -> dict[str, Any]:
        obj = copy.deepcopy(doc)
        obj["metadata"]["name"] += self.suffix
        if "roleRef" in obj:
            obj["roleRef"]["name"] += self.suffix
            obj["subjects"] = [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": self.user}
            ]
        return obj

    async def revoke(self) -> None:
        for res, name, namespace in reversed(self.created):
            with contextlib.suppress(NotFound):
                await self.admin.delete(res, name, namespace)
        self.created.clear()


async def _ensure_namespace(admin: Client, name: str) -> None:
    """Create ``name`` unless it exists. Never deleted: a later test (or a second run against
    the same control plane) would find it Terminating and could not create its Role there."""
    with contextlib.suppress(AlreadyExists):
        await admin.create(
            NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )


@pytest.fixture
async def identity(kube_control_plane: ControlPlane) -> AsyncIterator[Identity]:
    run = uuid.uuid4().hex[:8]
    user = f"nodepool-operator-{run}"
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig) as admin:
        ident = Identity(admin, user, kube_control_plane.kubeconfig_for(user), f"-{run}")
        try:
            yield ident
        finally:
            await ident.revoke()


async def allowed(
    client: Client,
    verb: str,
    group: str,
    resource: str,
    *,
    subresource: str = "",
    namespace: str = "",
    name: str = "",
) -> bool:
    """Whether ``client``'s identity may do this (a SelfSubjectAccessReview; nothing is done)."""
    attributes = {"verb": verb, "group": group, "resource": resource}
    attributes |= {
        k: v
        for k, v in {"subresource": subresource, "namespace": namespace, "name": name}.items()
        if v
    }
    review = await client.create(
        SSAR,
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attributes},
        },
    )
    return bool((review.get("status") or {}).get("allowed"))


async def _until_allowed(env: OperatorEnv, probe: Client, *checks: dict[str, str]) -> None:
    async def granted() -> bool:
        results = [await allowed(probe, **check) for check in checks]
        return all(results)

    await env.eventually(granted, "the new bindings to take effect", timeout=30)


# -- the scenario ------------------------------------------------------------------------------


def _pool(name: str, target: int, instance_type: str, **spec: Any) -> dict[str, Any]:
    return factories.nodepool(name, target=target, instance_type=instance_type, **spec)


def _pod(name: str, pool: str, memory: str, volume: dict[str, Any]) -> dict[str, Any]:
    mount = {"name": volume["name"], "mountPath": "/data"}
    app = factories.container("app", cpu="100m", memory=memory, volumeMounts=[mount])
    return factories.pod(
        name, node_selector={POOL_LABEL: pool}, containers=[app], volumes=[volume], grace=0
    )


def _ready(obj: Object) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


async def _pool_at(env: OperatorEnv, name: str, nodes: int) -> bool:
    pool = await env.client.get(NODEPOOLS, name)
    status = pool.get("status") or {}
    if not (
        status.get("observedGeneration") == pool["metadata"]["generation"]
        and status.get("currentNodes") == nodes
        and status.get("readyNodes") == nodes
        and _ready(pool)
    ):
        return False
    found = await env.client.list(NODES, label_selector=f"{POOL_LABEL}={name}")
    return len(found["items"]) == nodes and all(_ready(n) for n in found["items"])


async def _gone(env: OperatorEnv, res: Resource, name: str, namespace: str | None = None) -> bool:
    try:
        await env.client.get(res, name, namespace)
    except NotFound:
        return True
    return False


async def _leading(mgr: Manager) -> bool:
    return mgr.elector is not None and mgr.elector.is_leader


async def _scenario(env: OperatorEnv, mgr: Manager, ns: str) -> None:
    admin, run = env.client, env.run_id
    scaled, auto = f"scaled-{run}", f"auto-{run}"
    await env.eventually(lambda: _leading(mgr), "the operator to take the Lease")
    lease = await admin.get(LEASES, LEASE, LEASE_NAMESPACE)
    assert mgr.elector is not None
    assert lease["spec"]["holderIdentity"] == mgr.elector.options.identity

    # A NodePool scaled 0 -> 2 (as `kubectl scale` does) becomes Ready with 2 Nodes.
    await env.create(NODEPOOLS, _pool(scaled, 0, "m5.large", maxNodes=5))
    await env.eventually(lambda: _pool_at(env, scaled, 0), f"{scaled} at 0 nodes")
    await admin.patch_scale(NODEPOOLS, scaled, {"spec": {"replicas": 2}})
    await env.eventually(lambda: _pool_at(env, scaled, 2), f"{scaled} Ready with 2 nodes")

    # An Autoscaler raises targetNodes for a pending pod. The pod mounts a ConfigMap and a
    # second pod waits on a claim that never binds, so the Autoscaler looks both up (and the
    # claim's StorageClass), sets the second pod aside and emits an Event in the namespace.
    await env.create(NODEPOOLS, _pool(auto, 0, "mem96.large", cpu="64", memory="96Gi", maxNodes=3))
    await env.create(
        CONFIGMAPS,
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": {}},
        ns,
    )
    await env.create(
        PERSISTENTVOLUMECLAIMS,
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data"},
            "spec": {
                "storageClassName": f"nothing-provisions-{run}",
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        },
        ns,
    )
    await env.create(
        AUTOSCALERS,
        {
            "apiVersion": "kubeloop.dev/v1alpha1",
            "kind": "Autoscaler",
            "metadata": {"name": auto},
            "spec": {"nodePoolRef": {"name": auto}, "namespaces": [ns], "frequency": "30s"},
        },
    )
    config_volume = {"name": "config", "configMap": {"name": "app"}}
    claim_volume = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}
    await env.create(PODS, _pod("waiting", auto, "28Gi", config_volume), ns)
    await env.create(PODS, _pod("claim", auto, "4Gi", claim_volume), ns)

    async def scheduled() -> bool:
        return bool((await admin.get(PODS, "waiting", ns))["spec"].get("nodeName"))

    await env.eventually(scheduled, "the pending pod to get a node from the Autoscaler")
    assert (await admin.get(NODEPOOLS, auto))["spec"]["targetNodes"] == 1
    await env.eventually(lambda: _pool_at(env, auto, 1), f"{auto} Ready with 1 node")

    # An Instance gets a VM; deleting it terminates the VM and lets it go.
    await env.create(
        INSTANCES,
        {
            "apiVersion": "kubeloop.dev/v1alpha1",
            "kind": "Instance",
            "metadata": {"name": "vm"},
            "spec": {"instanceType": "m5.large", "image": "sim-image"},
        },
        ns,
    )

    async def running() -> dict[str, Any] | None:
        instance = await admin.get(INSTANCES, "vm", ns)
        status = instance.get("status") or {}
        return status if status.get("state") == "running" and _ready(instance) else None

    status = await env.eventually(running, "the Instance's VM to run")
    assert status is not None
    vm_id = status["instanceId"]
    await admin.delete(INSTANCES, "vm", ns)
    await env.eventually(lambda: _gone(env, INSTANCES, "vm", ns), "the Instance to go")
    assert (await env.cloud.describe(vm_id)).state == "terminated"

    # Scale-down cordons and deletes a Node; deleting the pools removes all their Nodes. A
    # kube-system pod on one Node makes the NodePool controller read kube-system's
    # PodDisruptionBudgets (none covers it: that Node stays, the other goes).
    system_pod = _pod(f"system-{run}", scaled, "1Gi", config_volume)
    system_pod["spec"]["volumes"] = []
    del system_pod["spec"]["containers"][0]["volumeMounts"]
    await env.create(PODS, system_pod, "kube-system")

    async def system_pod_bound() -> bool:
        found = await admin.get(PODS, f"system-{run}", "kube-system")
        return bool(found["spec"].get("nodeName"))

    await env.eventually(system_pod_bound, "the kube-system pod to be bound")
    await admin.patch_scale(NODEPOOLS, scaled, {"spec": {"replicas": 1}})
    await env.eventually(lambda: _pool_at(env, scaled, 1), f"{scaled} down to 1 node")
    await admin.delete(PODS, f"system-{run}", "kube-system", grace_period_seconds=0)
    await admin.delete(AUTOSCALERS, auto)
    for pod in ("waiting", "claim"):
        await admin.delete(PODS, pod, ns, grace_period_seconds=0)
    for pool in (scaled, auto):
        await admin.delete(NODEPOOLS, pool)
    for pool in (scaled, auto):
        await env.eventually(functools.partial(_gone, env, NODEPOOLS, pool), f"{pool} to go")
        nodes = await admin.list(NODES, label_selector=f"{POOL_LABEL}={pool}")
        assert nodes["items"] == []


@pytest.mark.integration
async def test_the_operator_runs_under_its_rbac_with_no_forbidden_request(
    identity: Identity,
    operator_env: OperatorEnv,
    kube_control_plane: ControlPlane,
) -> None:
    env = operator_env
    ns = kube_control_plane.create_namespace("rbac")
    requests = Requests()
    async with (
        Client.from_kubeconfig(
            identity.kubeconfig, field_manager=FIELD_MANAGER, observer=requests
        ) as client,
        Client.from_kubeconfig(identity.kubeconfig) as probe,
    ):
        # Without the binding the same client is refused, and the observer counts it.
        with pytest.raises(Forbidden):
            await client.list(NODEPOOLS)
        assert requests.refused() == [("list", NODEPOOLS.key, "", 403)]
        requests.seen.clear()

        await identity.grant(
            "cluster_role.yaml",
            "cluster_role_binding.yaml",
            "leader_election_role.yaml",
            "leader_election_role_binding.yaml",
        )
        await _until_allowed(
            env,
            probe,
            {"verb": "list", "group": "kubeloop.dev", "resource": "nodepools"},
            {
                "verb": "update",
                "group": "coordination.k8s.io",
                "resource": "leases",
                "namespace": LEASE_NAMESPACE,
                "name": LEASE,
            },
        )
        # In the cluster the operator finds its namespace in the pod; here it is given.
        settings = replace(
            env.settings, leader_election=True, leader_election_namespace=LEASE_NAMESPACE
        )
        assert not settings.install_crds
        mgr = build_manager(client, env.cloud, settings, registry=env.registry)
        assert mgr.options.leader_election
        assert mgr.options.leader_election_namespace == LEASE_NAMESPACE
        env.mgr, env.task = mgr, asyncio.create_task(mgr.run())
        await env.start_kubelets()  # the VMs' side (admin rights): it registers the Nodes
        try:
            await _scenario(env, mgr, ns)
        finally:
            await env.cleanup()  # stops the operator; releases the Lease

    released = await env.client.get(LEASES, LEASE, LEASE_NAMESPACE)
    assert released["spec"]["holderIdentity"] == ""
    assert requests.refused() == []
    # The scenario did reach every kind of call the role exists for.
    done = requests.authorized()
    pools, instances = NODEPOOLS.key, INSTANCES.key
    expected = {
        *(("list", r, "") for r in (pools, AUTOSCALERS.key, instances, "nodes", "pods")),
        *(("watch", r, "") for r in (pools, AUTOSCALERS.key, instances, "nodes", "pods")),
        ("patch", pools, ""),
        ("update", pools, "status"),
        ("get", pools, "scale"),
        ("update", pools, "scale"),
        ("update", AUTOSCALERS.key, "status"),
        ("patch", instances, ""),
        ("update", instances, "status"),
        ("patch", "nodes", ""),
        ("delete", "nodes", ""),
        ("get", "configmaps", ""),
        ("get", "persistentvolumeclaims", ""),
        ("get", "storageclasses.storage.k8s.io", ""),
        ("list", PDBS.key, ""),
        ("create", "events.events.k8s.io", ""),
        ("get", LEASES.key, ""),
        ("update", LEASES.key, ""),
    }
    assert expected - done == set()


@pytest.mark.integration
async def test_the_operators_role_allows_nothing_it_should_not(
    identity: Identity, operator_env: OperatorEnv, kube_control_plane: ControlPlane
) -> None:
    """Beyond the golden list: the dangerous rights, checked by the apiserver's authorizer."""
    ns = kube_control_plane.create_namespace("rbac")
    await identity.grant(
        "cluster_role.yaml",
        "cluster_role_binding.yaml",
        "leader_election_role.yaml",
        "leader_election_role_binding.yaml",
    )
    async with Client.from_kubeconfig(identity.kubeconfig) as probe:
        await _until_allowed(
            operator_env, probe, {"verb": "list", "group": "kubeloop.dev", "resource": "nodepools"}
        )
        denied: list[dict[str, str]] = [
            {"verb": "get", "group": "", "resource": "secrets", "namespace": ns},
            {"verb": "list", "group": "", "resource": "secrets"},
            {"verb": "create", "group": "", "resource": "pods", "namespace": ns},
            {"verb": "delete", "group": "", "resource": "pods", "namespace": ns},
            # a user's pod spec: only the deprecated reserveNewNodes wrote it (opt-in grant)
            {"verb": "patch", "group": "", "resource": "pods", "namespace": ns},
            {"verb": "create", "group": "", "resource": "nodes"},
            {"verb": "patch", "group": "", "resource": "nodes", "subresource": "status"},
            {"verb": "get", "group": "", "resource": "nodes", "subresource": "proxy"},
            {"verb": "update", "group": "kubeloop.dev", "resource": "nodepools"},
            {"verb": "delete", "group": "kubeloop.dev", "resource": "nodepools"},
            {"verb": "create", "group": "kubeloop.dev", "resource": "instances"},
            {"verb": "patch", "group": "kubeloop.dev", "resource": "nodepools/status"},
            {"verb": "create", "group": "apiextensions.k8s.io", "resource": CRDS.plural},
            {
                "verb": "update",
                "group": "coordination.k8s.io",
                "resource": "leases",
                "namespace": LEASE_NAMESPACE,
                "name": "someone-elses-lease",
            },
            {
                "verb": "get",
                "group": "coordination.k8s.io",
                "resource": "leases",
                "namespace": ns,
                "name": LEASE,
            },
            {
                # where the Lease used to be: no rights left there
                "verb": "update",
                "group": "coordination.k8s.io",
                "resource": "leases",
                "namespace": "default",
                "name": LEASE,
            },
            {"verb": "bind", "group": "rbac.authorization.k8s.io", "resource": "clusterroles"},
            {"verb": "escalate", "group": "rbac.authorization.k8s.io", "resource": "clusterroles"},
            {"verb": "impersonate", "group": "", "resource": "users"},
        ]
        granted = [check for check in denied if await allowed(probe, **check)]
    assert granted == []


@pytest.mark.integration
async def test_the_crd_installer_role_is_enough_to_install_the_crds(
    identity: Identity, operator_env: OperatorEnv
) -> None:
    """install_crds under crd_installer_role.yaml alone: the CRDs exist already (the session
    installed them), so this reads and compares them, updates any that differ and waits until
    they are served; create, which it would need for a missing one, is checked by review."""
    requests = Requests()
    async with (
        Client.from_kubeconfig(identity.kubeconfig, observer=requests) as client,
        Client.from_kubeconfig(identity.kubeconfig) as probe,
    ):
        with pytest.raises(Forbidden):
            await install_crds(client, crds(), timeout=10)
        requests.seen.clear()
        await identity.grant("crd_installer_role.yaml")
        names = [crd["metadata"]["name"] for crd in crds()]
        await _until_allowed(
            operator_env,
            probe,
            *(
                {"verb": "get", "group": CRDS.group, "resource": CRDS.plural, "name": n}
                for n in names
            ),
        )
        await install_crds(client, crds(), timeout=30)
        assert requests.refused() == []
        assert await allowed(probe, "create", CRDS.group, CRDS.plural)
        assert not await allowed(probe, "update", CRDS.group, CRDS.plural, name="other.example.com")
        assert not await allowed(probe, "delete", CRDS.group, CRDS.plural, name=names[0])

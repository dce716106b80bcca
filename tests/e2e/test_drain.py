"""Scale-down drains: the chosen Node is tainted first, its pods leave only through the Eviction
API, and the Node and VM go only once no workload pod is left.

Oracles are the apiserver's objects (the Node, its taints, the pods), the cloud's records, and
every request the operator's client sent with the answer it got (a request observer: which
evictions were made, which a PodDisruptionBudget refused with 429).
"""

from __future__ import annotations

from collections import Counter

import pytest

from kubeloop import NODES, PODS, NotFound, Object
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, NODEPOOLS
from nodepool_operator.controllers._scope import POOL_LABEL
from tests import factories
from tests.e2e.conftest import OperatorEnv
from tests.e2e.disruption import (
    CANDIDATE,
    DEPLOYMENTS_RES,
    DISRUPTING,
    DO_NOT_DISRUPT,
    PDBS,
    UNNEEDED,
    DeploymentPods,
    NodeWatch,
    Requests,
    available,
    budget,
    deployment,
    events,
    nodes_of,
    pod,
    pool,
    ready_nodes,
    settled_nodes,
)
from tests.e2e.test_autoscaler import Timeline, autoscaler_manifest

pytestmark = pytest.mark.integration


@pytest.fixture
def namespace(kube_control_plane: ControlPlane) -> str:
    return kube_control_plane.create_namespace("drain")


async def autoscaled_pool(env: OperatorEnv, prefix: str) -> tuple[str, Requests]:
    """A pool of two nodes and the operator (NodePool and Autoscaler controllers) started,
    every request of its client observed; the pool's name, and the requests."""
    requests = Requests()
    env.client.add_observer(requests)
    name = f"{prefix}-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 2))
    await env.start(controllers=("nodepool", "autoscaler"))
    return name, requests


async def scale_down_quickly(env: OperatorEnv, pool_name: str, namespace: str) -> None:
    """An Autoscaler for ``pool_name`` that looks every second and finds a node unneeded
    after two."""
    await env.create(
        AUTOSCALERS,
        autoscaler_manifest(
            f"as-{env.run_id}",
            pool_name,
            namespace,
            frequency="1s",
            scaleDownEnabled=True,
            scaleDownUnneededTime="2s",
        ),
    )


async def test_a_do_not_disrupt_pod_holds_its_node_until_the_annotation_goes(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"dnd-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 1))
    await env.start(controllers=("nodepool",))

    async def one_ready_node() -> list[Object]:
        found = await nodes_of(env, name)
        return found if len(found) == 1 else []

    (node,) = await env.eventually(one_ready_node, "one node")
    node_name = node["metadata"]["name"]
    # A bare pod: safe-to-evict "true" lifts the no-controller blocker, so once the
    # do-not-disrupt annotation goes, it may be evicted (as before the default blockers).
    held = pod(
        "held",
        name,
        annotations={
            DO_NOT_DISRUPT: "true",
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
        },
    )
    await env.create(PODS, held, namespace)

    async def bound() -> bool:
        current = await env.client.get(PODS, "held", namespace)
        return bool(current["spec"].get("nodeName") == node_name)

    await env.eventually(bound, "the pod to be bound to the node")
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 0}})

    async def blocked() -> list[str]:
        return await events(env, name, "DisruptionBlocked")

    notes = await env.eventually(blocked, "a DisruptionBlocked Event on the pool")
    assert f"pod {namespace}/held is annotated {DO_NOT_DISRUPT}" in notes[0]
    # Held: the Node is tainted (nothing new lands on it), the pod was not touched, the
    # Node and the VM are still there.
    node = await env.client.get(NODES, node_name)
    assert any(t["key"] == DISRUPTING for t in node["spec"].get("taints") or ())
    current = await env.client.get(PODS, "held", namespace)
    assert not current["metadata"].get("deletionTimestamp")
    assert requests.evictions() == 0
    assert len(env.cloud.snapshot().live) == 1

    # The annotation goes: the pod is evicted (never deleted), then the Node and the VM go.
    await env.client.patch(
        PODS, "held", {"metadata": {"annotations": {DO_NOT_DISRUPT: None}}}, namespace
    )

    async def gone() -> bool:
        return not await nodes_of(env, name) and not env.cloud.snapshot().live

    await env.eventually(gone, "the node and its VM to be removed", timeout=60)
    with pytest.raises(NotFound):
        await env.client.get(PODS, "held", namespace)
    assert requests.evictions() == 1
    assert requests.pod_deletes() == 0


async def test_a_pdb_with_max_unavailable_0_holds_the_scale_down_until_relaxed(
    operator_env: OperatorEnv, namespace: str
) -> None:
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"pdb-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 1))
    await env.start(controllers=("nodepool",))

    async def one() -> list[Object]:
        return await ready_nodes(env, name, 1)

    (first,) = await env.eventually(one, "the first node Ready", timeout=90)
    drained = first["metadata"]["name"]
    # The Deployment's two pods land on the only node; a PDB allows no disruption.
    dep = deployment(2)
    dep["spec"]["template"]["spec"]["nodeSelector"] = {POOL_LABEL: name}
    await env.create(DEPLOYMENTS_RES, dep, namespace)
    await env.create(PDBS, budget(0), namespace)

    async def two_available() -> bool:
        return await available(env, namespace, 2)

    await env.eventually(two_available, "the Deployment's 2 pods available", timeout=90)
    # A second node, busy with a pod of its own that cannot move: the pool will keep it and
    # drain the first (least utilised, its pods fit on the second).
    await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 2}})

    async def two() -> list[Object]:
        return await ready_nodes(env, name, 2)

    both = await env.eventually(two, "the second node Ready", timeout=90)
    (kept,) = [n["metadata"]["name"] for n in both if n["metadata"]["name"] != drained]
    filler = pod("filler", name)
    filler["spec"]["nodeSelector"] = {"kubernetes.io/hostname": kept}
    filler["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "1500m"
    await env.create(PODS, filler, namespace)

    async def filler_running() -> bool:
        current = await env.client.get(PODS, "filler", namespace)
        return bool(current.get("status", {}).get("phase") == "Running")

    await env.eventually(filler_running, "the filler pod running on the kept node", timeout=90)
    watch = DeploymentPods(env.client, namespace)
    await watch.start()
    try:
        before = dict(watch.nodes)
        assert set(before.values()) == {drained}
        await env.client.patch(NODEPOOLS, name, {"spec": {"targetNodes": 1}})

        async def refused_twice() -> bool:
            return requests.evictions(refused=True) >= 2

        await env.eventually(refused_twice, "the PDB to refuse evictions (429) twice")
        # Held: tainted, still there with its VM, both pods untouched.
        node = await env.client.get(NODES, drained)
        assert any(t["key"] == DISRUPTING for t in node["spec"].get("taints") or ())
        assert len(env.cloud.snapshot().live) == 2
        assert requests.evictions() == 0
        assert watch.deleted == set()
        assert await events(env, name, "EvictionBlocked")

        # Relaxed: one at a time, each replaced before the next goes.
        await env.client.patch(PDBS, "web", {"spec": {"maxUnavailable": 1}}, namespace)

        async def removed() -> bool:
            return [n["metadata"]["name"] for n in await nodes_of(env, name)] == [kept]

        await env.eventually(removed, "the drained node to be removed", timeout=120)
        await env.eventually(two_available, "2 replicas available again", timeout=90)
        assert len(env.cloud.snapshot().live) == 1
        assert watch.deleted == set(before)  # both original pods left, through evictions
        assert requests.evictions() >= 2
        assert requests.pod_deletes() == 0
        replacements = {p: n for p, n in watch.nodes.items() if p not in before}
        assert len(replacements) >= 2
        assert set(replacements.values()) == {kept}  # nothing landed on the tainted node
        assert min(watch.available) >= 1  # never both gone at once
    finally:
        await watch.stop()


async def test_the_autoscaler_consolidates_an_underutilised_node_whose_pods_fit_elsewhere(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """Two nodes, one Deployment pod on each (a hostname spread), both nodes far below half
    used: one is unneeded (its pod fits on the other), the other is not (then both pods
    would have nowhere to go). The Autoscaler lowers the target by one; the NodePool drains
    that node through an eviction and the Deployment's replacement lands on the other."""
    env = operator_env
    name, requests = await autoscaled_pool(env, "cons")

    async def two_ready() -> bool:
        return len(await ready_nodes(env, name, 2, untainted=True)) == 2

    await env.eventually(two_ready, "two Ready, untainted nodes", timeout=90)
    dep = deployment(2)
    spec = dep["spec"]["template"]["spec"]
    spec["nodeSelector"] = {POOL_LABEL: name}
    spec["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "nodeTaintsPolicy": "Honor",
            "labelSelector": {"matchLabels": {"app": "web"}},
        }
    ]
    await env.create(DEPLOYMENTS_RES, dep, namespace)

    async def spread() -> bool:
        return await available(env, namespace, 2)

    await env.eventually(spread, "2 replicas available", timeout=90)
    watch = DeploymentPods(env.client, namespace)
    await watch.start()
    timeline = await Timeline.watch(env.client, name, namespace)
    try:
        before = dict(watch.nodes)
        assert len(set(before.values())) == 2  # one per node
        await scale_down_quickly(env, name, namespace)

        async def consolidated() -> bool:
            nodes = await nodes_of(env, name)
            return len(nodes) == 1 and await spread()

        await env.eventually(consolidated, "one node with both replicas", timeout=120)
        (kept,) = [n["metadata"]["name"] for n in await nodes_of(env, name)]
        assert timeline.values == [2, 1]
        assert len(env.cloud.snapshot().live) == 1
        assert requests.evictions() == 1
        assert requests.pod_deletes() == 0
        moved = {p for p, n in before.items() if n != kept}
        assert watch.deleted == moved
        replacements = {p: n for p, n in watch.nodes.items() if p not in before}
        assert set(replacements.values()) == {kept}
        assert min(watch.available) >= 1
    finally:
        await timeline.stop()
        await watch.stop()


async def test_the_autoscaler_names_the_node_a_budget_lets_go_and_that_one_is_drained(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """Two nodes, one pod on each (Deployments ``held`` and ``free``, each preferring its
    node): either node can go, its pod fitting on the other, not both. A PodDisruptionBudget
    (computed by kube-controller-manager) allows no disruption of ``held``'s pod, on the node
    the plain order takes first (the first by name). The Autoscaler names the other node
    unneeded and lowers the target; the NodePool controller drains that one: the budget never
    has to refuse an eviction, and the first node is never named nor tainted."""
    env = operator_env
    name, requests = await autoscaled_pool(env, "right")

    async def two() -> list[Object]:
        return await ready_nodes(env, name, 2, untainted=True)

    first, second = sorted(n["metadata"]["name"] for n in await env.eventually(two, "2 nodes"))
    for app, node_name in (("held", first), ("free", second)):
        dep = factories.deployment(app, 1)
        spec = dep["spec"]["template"]["spec"]
        spec["nodeSelector"] = {POOL_LABEL: name}
        term = {"key": "kubernetes.io/hostname", "operator": "In", "values": [node_name]}
        preferred = [{"weight": 100, "preference": {"matchExpressions": [term]}}]
        spec["affinity"] = {
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}
        }
        await env.create(DEPLOYMENTS_RES, dep, namespace)
    await env.create(PDBS, factories.pdb("held", max_unavailable=0), namespace)

    async def placed() -> dict[str, str]:
        pods = (await env.client.list(PODS, namespace))["items"]
        running = {
            p["metadata"]["labels"]["app"]: p["spec"].get("nodeName", "")
            for p in pods
            if p.get("status", {}).get("phase") == "Running"
        }
        return running if running == {"held": first, "free": second} else {}

    await env.eventually(placed, "one pod running on each node", timeout=90)

    async def budget_computed() -> bool:
        pdb = await env.client.get(PDBS, "held", namespace)
        status = pdb.get("status") or {}
        return status.get("observedGeneration") == pdb["metadata"]["generation"] and (
            status.get("currentHealthy") == 1 and status.get("disruptionsAllowed") == 0
        )

    await env.eventually(budget_computed, "the budget's status: no disruption allowed")
    watch = NodeWatch(env, f"{POOL_LABEL}={name}")
    await watch.start()
    try:
        await scale_down_quickly(env, name, namespace)

        async def one_left() -> list[str]:
            names = [n["metadata"]["name"] for n in await nodes_of(env, name)]
            return names if names == [first] else []

        await env.eventually(one_left, "the second node removed", timeout=120)
    finally:
        await watch.stop()
    assert watch.named == watch.soft == {second}
    assert True not in watch.tainted.get(first, [])
    assert requests.evictions(refused=True) == 0
    assert requests.evictions() == 1  # free's pod, through the Eviction API
    assert requests.pod_deletes() == 0
    held = [
        p
        for p in (await env.client.list(PODS, namespace))["items"]
        if "held" in p["metadata"]["name"]
    ]
    assert [p["spec"]["nodeName"] for p in held] == [first]  # never moved


async def test_a_mixed_burst_spread_over_too_many_nodes_is_consolidated_to_the_optimum(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """A pool of four nodes, then a mixed burst onto it: four 700m pods, then four 350m.
    kube-scheduler (LeastAllocated) spreads it over all four, 1050m of 2000m on each: above
    the scale-down's threshold, so no node is unneeded by that rule, yet the pods fit on
    three (the optimum: 700m + 700m + 350m twice, the two 350m left on a third). The
    Autoscaler's consolidation names one node and lowers the target once; the NodePool
    controller drains it through evictions; its two pods land on the others. The pool ends
    at three nodes with every pod running, and goes no lower."""
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"spread-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 4))
    await env.start(controllers=("nodepool", "autoscaler"))
    await settled_nodes(env, name, 4)

    async def running() -> dict[str, str]:
        """Each running pod's node, when no pod of the namespace waits or is going."""
        pods = (await env.client.list(PODS, namespace))["items"]
        if any(
            p["status"].get("phase") != "Running" or p["metadata"].get("deletionTimestamp")
            for p in pods
        ):
            return {}
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}

    for app, cpu in (("big", "700m"), ("small", "350m")):
        dep = factories.deployment(app, 4, cpu=cpu, node_selector={POOL_LABEL: name})
        await env.create(DEPLOYMENTS_RES, dep, namespace)

        async def placed(app: str = app) -> dict[str, str]:
            found = await running()
            return found if sum(1 for p in found if p.startswith(app)) == 4 else {}

        before = await env.eventually(placed, f"4 {app} pods running", timeout=90)
    assert len(set(before.values())) == 4  # spread over every node: one above the optimum
    timeline = await Timeline.watch(env.client, name, namespace)
    watch = NodeWatch(env, f"{POOL_LABEL}={name}")
    await watch.start()
    try:
        await scale_down_quickly(env, name, namespace)

        async def consolidated() -> dict[str, str]:
            found = await running()
            nodes = await nodes_of(env, name)
            if len(nodes) != 3 or len(found) != 8:
                return {}
            return found if set(found.values()) <= {n["metadata"]["name"] for n in nodes} else {}

        after = await env.eventually(consolidated, "8 pods running on 3 nodes", timeout=120)

        async def said() -> list[str]:
            notes = await events(env, name, "ScaleDown")
            return [n for n in notes if "consolidation" in n]

        (note,) = await env.eventually(said, "the scale-down's Event on the pool")
        assert note.endswith("(consolidation: the pods fit on 3 nodes)"), note
    finally:
        await timeline.stop()
        await watch.stop()
    assert timeline.values == [4, 3]
    assert len(env.cloud.snapshot().live) == 3
    assert requests.evictions() == 2  # the two pods of the drained node, nothing else
    assert requests.pod_deletes() == 0
    gone = set(before.values()) - set(after.values())
    assert len(gone) == 1
    assert watch.named == gone  # the node the consolidation named is the one drained
    assert watch.soft == gone  # and kube-scheduler was told to avoid it meanwhile
    moved = {p for p, n in before.items() if n in gone}
    assert len(moved) == 2
    assert not moved & set(after)  # evicted, replaced by the Deployments' new pods


async def test_a_replacement_the_scheduler_undoes_stops_and_is_not_tried_again(
    operator_env: OperatorEnv, namespace: str
) -> None:
    """This bed's kube-scheduler scores ``LeastAllocated``. Three nodes, each a 950m and a
    200m pod (1150m of 2000m; its spread puts them so): no drain frees a node, but two nodes
    traded for one new one would leave two. The Autoscaler raises the target 3 -> 4 and
    drains the first named node once the new one is Ready; the scheduler puts both its pods
    on the empty new node (the least allocated), so the second named node's 950m has no place
    and the pool is back at three nodes of 1150m. The replacement stops there, and with the
    same workload no other starts: after its rest (three unneeded times) the Autoscaler's
    ``lastDecision`` says why, the target history is 3, 4, 3, two evictions, no pod deleted,
    and the node left named has its name and soft taint taken off."""
    env = operator_env
    requests = Requests()
    env.client.add_observer(requests)
    name = f"undone-{env.run_id}"
    await env.create(NODEPOOLS, pool(name, 3))
    await env.start(controllers=("nodepool", "autoscaler"))
    await settled_nodes(env, name, 3)

    async def running() -> dict[str, str]:
        pods = (await env.client.list(PODS, namespace))["items"]
        if any(
            p["status"].get("phase") != "Running" or p["metadata"].get("deletionTimestamp")
            for p in pods
        ):
            return {}
        return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}

    for app, cpu in (("big", "950m"), ("small", "200m")):
        dep = factories.deployment(app, 3, cpu=cpu, node_selector={POOL_LABEL: name})
        await env.create(DEPLOYMENTS_RES, dep, namespace)

        async def placed(app: str = app) -> dict[str, str]:
            found = await running()
            return found if sum(1 for p in found if p.startswith(app)) == 3 else {}

        before = await env.eventually(placed, f"3 {app} pods running", timeout=90)
    assert len(set(before.values())) == 3
    assert sorted(Counter(before.values()).values()) == [2, 2, 2]  # one of each on each
    timeline = await Timeline.watch(env.client, name, namespace)
    try:
        await scale_down_quickly(env, name, namespace)

        async def undone() -> dict[str, str]:
            found = await running()
            nodes = await nodes_of(env, name)
            return found if len(nodes) == 3 and timeline.values[-2:] == [4, 3] else {}

        try:
            after = await env.eventually(undone, "a raise to 4, then back to 3", timeout=180)
        except AssertionError as e:
            seen = {r: await events(env, name, r) for r in ("TriggeredScaleUp", "ScaleDown")}
            where = await running()
            raise AssertionError(f"{e}; timeline {timeline.values}; {where}; {seen}") from None

        # after the rest (three unneeded times of 2 s) a pass finds the workload the
        # replacement failed for, and says so instead of starting another
        async def refused() -> str | None:
            scaler = await env.client.get(AUTOSCALERS, f"as-{env.run_id}")
            text = (scaler.get("status") or {}).get("lastDecision") or ""
            return text if "one failed for this workload" in text else None

        decision = await env.eventually(refused, "lastDecision: no replacement", timeout=60)
    finally:
        await timeline.stop()
    seen = {r: await events(env, name, r) for r in ("TriggeredScaleUp", "ScaleDown")}
    assert timeline.values == [3, 4, 3], (seen, decision)
    # the name and the soft taint came off the node the drain left (a strategic merge patch)
    for node in await nodes_of(env, name):
        assert UNNEEDED not in (node["metadata"].get("annotations") or {}), node["metadata"]
        taints = (node.get("spec") or {}).get("taints") or []
        assert all(t["key"] != CANDIDATE for t in taints), taints
    assert sorted(Counter(after.values()).values()) == [2, 2, 2]
    assert requests.evictions() == 2, (seen, requests.seen)
    assert requests.pod_deletes() == 0
    assert len(env.cloud.snapshot().live) == 3

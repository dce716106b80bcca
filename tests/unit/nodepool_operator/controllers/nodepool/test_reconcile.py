"""The NodePool controller's reconcile, once, in process: a fixed snapshot of the cluster and
the real simulated cloud in a known state in; the writes it sent and the cloud calls it made
out, in order (Karpenter's ``ExpectObjectReconciled``). What needs the apiserver (the writes
applied, the scheduler, convergence over passes) stays in tests/e2e."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from kubeloop import KubeloopError, Request
from nodepool_operator.api import parse_nodeclass
from nodepool_operator.cloud import Instance, NodeBootstrap, SimulatedCloud, provider_id
from nodepool_operator.controllers._reserve import RESERVED_KEY
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.controllers._unneeded import DRAIN_TIMED_OUT_AT, format_time
from nodepool_operator.controllers._unneeded import UNNEEDED_ANNOTATION as UNNEEDED
from nodepool_operator.controllers.nodepool import FINALIZER, NODE_FINALIZER
from nodepool_operator.controllers.nodepool._drift import DRIFTED_ANNOTATION as DRIFTED
from nodepool_operator.controllers.nodepool._intent import create_request, idempotency_token
from nodepool_operator.controllers.nodepool._node_sync import OWNED_ANNOTATION, Owned
from tests import factories
from tests.unit.nodepool_operator.controllers import in_process

UID = "uid-web"
WEB = Request("web")
DISRUPTING = "kubeloop.dev/disrupting"
RS = factories.owner_reference("ReplicaSet", "web-rs", controller=True)
LONG_AGO = format_time(time.time() - 7200)


@pytest.fixture
def cloud(tmp_path: Path) -> SimulatedCloud:
    return SimulatedCloud(tmp_path / "cloud.sqlite", boot_seconds=0)


async def launched(cloud: SimulatedCloud, *names: str) -> list[Instance]:
    """VMs of the pool, running, as the controller would have launched them."""
    return [
        await cloud.create(
            create_request(pool_name="web", pool_uid=UID, instance_type="m5.large", name=name)
        )
        for name in names
    ]


def pool(
    vms: list[Instance] = (),  # type: ignore[assignment]
    *,
    target: int,
    deleting: bool = False,
    status: dict[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """The pool ``web`` with its finalizer, and a record of each VM (registered as a Node of
    the same name)."""
    obj = factories.nodepool("web", target=target, generation=1, **spec)
    obj["metadata"].update(uid=UID, finalizers=[FINALIZER])
    if deleting:
        obj["metadata"]["deletionTimestamp"] = format_time(time.time() - 1)
    records = [
        {"name": vm.name, "instanceId": vm.id, "state": "running", "nodeName": vm.name}
        for vm in vms
    ]
    obj["status"] = {"instances": records, **(status or {})}
    return obj


def node(vm: Instance, *, ready: bool = True, since: str = LONG_AGO, **fields: Any) -> Any:
    """``vm``'s Node as the pool adopted it: its label, the termination finalizer."""
    obj = factories.node(
        vm.name,
        labels={POOL_LABEL: "web"},
        provider_id=provider_id(vm.id),
        capacity={"cpu": "2", "memory": "8Gi", "pods": "110"},
        conditions=[factories.condition("Ready", ready, lastTransitionTime=since)],
        **fields,
    )
    # in line with the pool already (no labels or taints of its own to keep)
    obj["metadata"]["finalizers"] = [NODE_FINALIZER]
    obj["metadata"]["annotations"] = {OWNED_ANNOTATION: Owned().encode()}
    return obj


def disrupted(vm: Instance, since: str = LONG_AGO) -> Any:
    """``vm``'s Node tainted for removal ``since`` (by default two hours ago)."""
    return node(vm, taints=[{**factories.taint(DISRUPTING), "timeAdded": since}])


async def scaling_down(cloud: SimulatedCloud) -> tuple[Instance, Instance, list[Any]]:
    """A pool of two scaled down to one: web-b's record deleting, its Node tainted; the VMs
    kept and leaving, and the objects."""
    kept, leaving = await launched(cloud, "web-a", "web-b")
    obj = pool([kept, leaving], target=1)
    obj["status"]["instances"][1]["state"] = "deleting"
    return kept, leaving, [obj, node(kept), disrupted(leaving)]


def workload(name: str, on: Instance, cpu: str = "100m") -> Any:
    return factories.pod(
        name, namespace="default", owner=RS, node=on.name, cpu=cpu, phase="Running"
    )


def condition(status: dict[str, Any], kind: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in status["conditions"] if c["type"] == kind]
    (only,) = found
    return only


def deleting_message(done: in_process.Pass) -> str:
    """The Deleting condition's message of the pass's one status write."""
    (status,) = done.status_writes()
    return str(condition(status, "Deleting")["message"])


def records(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["name"], r["state"]) for r in status["instances"]]


async def run(
    objects: list[Any], cloud: SimulatedCloud, tmp_path: Path, **kw: Any
) -> in_process.Pass:
    config = in_process.settings(tmp_path)
    return await in_process.reconcile(objects, cloud, config, WEB, controller="nodepool", **kw)


# -- a new pool, scale up ---------------------------------------------------------------------


async def test_a_new_pool_gets_its_finalizer_then_records_then_vms(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    fresh = factories.nodepool("web", target=2, generation=1)
    fresh["metadata"]["uid"] = UID

    done = await run([fresh], cloud, tmp_path)

    first, second = done.status_writes()
    intents = [r["name"] for r in first["instances"]]
    assert done.timeline() == [
        "patch NodePool web",
        "update NodePool/status web",
        *(f"cloud create {name}" for name in intents),
        "update NodePool/status web",
    ]
    assert done.writes[0].body[-1] == {
        "op": "add",
        "path": "/metadata/finalizers",
        "value": [FINALIZER],
    }
    # the intents are recorded, with no id, before the cloud is asked
    assert first["instances"] == [{"name": n, "state": "creating"} for n in intents]
    assert len(intents) == 2
    # each VM made with the intent's token: found by it, and named after it
    live = cloud.snapshot().live
    assert sorted(vm.name for vm in live) == sorted(intents)
    for name in intents:
        found = await cloud.find(idempotency_token(UID, name))
        assert found is not None
        assert found.name == name
    by_name = {vm.name: vm.id for vm in live}
    assert [(r["name"], r["instanceId"]) for r in second["instances"]] == [
        (n, by_name[n]) for n in intents
    ]
    assert second["currentNodes"] == 2
    assert second["readyNodes"] == 0
    assert done.events() == [("ScalingUp", "0 -> 2 nodes: creating 2 VM(s)")]


async def test_scale_up_records_one_intent_and_creates_one_vm(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")

    done = await run([pool(vms, target=3), *(node(vm) for vm in vms)], cloud, tmp_path)

    first = done.status_writes()[0]
    new = [r["name"] for r in first["instances"] if r["state"] == "creating"]
    assert len(new) == 1
    assert done.timeline() == [
        "update NodePool/status web",
        f"cloud create {new[0]}",
        "update NodePool/status web",
    ]
    assert len(cloud.snapshot().live) == 3
    assert done.events() == [("ScalingUp", "2 -> 3 nodes: creating 1 VM(s)")]


@pytest.mark.parametrize(
    ("scaler", "gated"),
    [("none", False), ("another pool's", False), ("scaling", True), ("being deleted", False)],
)
async def test_the_new_vms_of_an_autoscaled_pool_register_gated(
    cloud: SimulatedCloud, tmp_path: Path, scaler: str, gated: bool
) -> None:
    """An Autoscaler scales the pool: the new VM's bootstrap gives its Node the reservation
    taint (the gate its nominations open); a pool scaled by hand registers open, and so does
    one whose Autoscaler is being deleted (held by someone's finalizer: its controller lifts
    no gate, which would then wait for the backstop)."""
    vms = await launched(cloud, "web-a")
    scalers = {
        "none": [],
        "another pool's": [factories.autoscaler("as", pool="api", namespaces=["prod"])],
        "scaling": [factories.autoscaler("as", pool="web", namespaces=["prod"])],
        "being deleted": [factories.autoscaler("as", pool="web", namespaces=["prod"])],
    }[scaler]
    if scaler == "being deleted":
        scalers[0]["metadata"].update(
            deletionTimestamp=format_time(time.time() - 1), finalizers=["example.com/hold"]
        )

    await run([pool(vms, target=2), node(vms[0]), *scalers], cloud, tmp_path)

    [new] = [vm for vm in cloud.snapshot().live if vm.name != "web-a"]
    boot = NodeBootstrap.decode(new.user_data)
    assert boot is not None
    gate = {"key": RESERVED_KEY, "value": new.name, "effect": "NoSchedule"}
    assert (gate in boot.taints) is gated


# -- nothing changed ----------------------------------------------------------------------------


async def test_a_pool_as_wanted_is_written_once_then_not_again(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    nodes = [node(vm) for vm in vms]

    first = await run([pool(vms, target=2), *nodes], cloud, tmp_path)
    # its status as that pass wrote it is what the next pass reads
    (status,) = first.status_writes()
    settled = await run([pool(vms, target=2, status=status), *nodes], cloud, tmp_path)

    assert first.kinds() == ["update NodePool/status web"]
    assert status["readyNodes"] == 2
    assert settled.writes == []  # the seed lesson: status only when it changed
    assert settled.journal.mutating() == []
    assert settled.requeue_after == in_process.settings(tmp_path).gc_grace_seconds


# -- scale down, drain ----------------------------------------------------------------------------


def _two_nodes_one_busy(vms: list[Instance]) -> list[Any]:
    busy, light = vms
    return [
        node(busy),
        node(light),
        workload("big", busy, cpu="1"),
        workload("small", light, cpu="100m"),
    ]


async def test_scale_down_taints_then_evicts_through_the_eviction_api(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")

    done = await run([pool(vms, target=1), *_two_nodes_one_busy(vms)], cloud, tmp_path)

    # the least used Node goes: tainted before the plan is recorded and before any eviction
    timeline = done.timeline()
    assert timeline[:2] == ["patch Node web-b", "update NodePool/status web"]
    assert timeline.index("evict Pod/eviction default/small") > 0
    assert "evict Pod/eviction default/big" not in timeline
    (taint,) = [w for w in done.writes if w.kind == "Node"]  # once, not again by the drain
    assert [t["key"] for t in taint.body[-1]["value"]] == [DISRUPTING]
    assert records(done.status_writes()[0]) == [("web-a", "running"), ("web-b", "deleting")]
    # pods still on it: the VM and the Node stay until a later pass finds it drained
    assert done.journal.mutating() == []
    assert not any(w.verb == "delete" for w in done.writes)
    assert records(done.status_writes()[-1]) == [("web-a", "running"), ("web-b", "deleting")]
    assert ("ScalingDown", "2 -> 1 nodes: removing web-b") in done.events()
    assert done.requeue_after == 1.0  # pods terminating: look again soon


async def test_scale_down_takes_the_node_the_autoscaler_named(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    objects = [pool(vms, target=1), *_two_nodes_one_busy(vms)]
    # web-a, the busier, was found unneeded for scaleDownUnneededTime (its pod fits on web-b)
    objects[1]["metadata"]["annotations"][UNNEEDED] = "2026-01-01T12:00:00Z"

    done = await run(objects, cloud, tmp_path)

    assert done.timeline()[:2] == ["patch Node web-a", "update NodePool/status web"]
    assert records(done.status_writes()[0]) == [("web-a", "deleting"), ("web-b", "running")]
    assert "evict Pod/eviction default/big" in done.kinds()
    assert not any("small" in kind for kind in done.kinds())
    assert ("ScalingDown", "2 -> 1 nodes: removing web-a") in done.events()


async def test_scale_down_takes_a_node_whose_pods_may_be_evicted_now_first(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    objects = [pool(vms, target=1), *_two_nodes_one_busy(vms)]
    objects[-1]["metadata"]["labels"] = {"app": "small"}
    # the budget over web-b's pod allows no disruption now, as the cluster computed it
    held = factories.pdb("small", namespace="default", max_unavailable=0)
    held["metadata"]["generation"] = 1
    held["status"] = {"disruptionsAllowed": 0, "observedGeneration": 1}

    done = await run([*objects, held], cloud, tmp_path)

    # web-b, the least used, would wait on its budget: web-a goes (its pod fits on web-b)
    assert done.timeline()[:2] == ["patch Node web-a", "update NodePool/status web"]
    assert "evict Pod/eviction default/big" in done.kinds()
    assert not any("small" in kind for kind in done.kinds())


async def test_an_eviction_a_budget_refuses_waits_and_says_so(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")

    done = await run(
        [pool(vms, target=1), *_two_nodes_one_busy(vms)],
        cloud,
        tmp_path,
        refuse_evictions=["default/small"],
    )

    assert "evict Pod/eviction default/small" in done.kinds()
    assert done.journal.mutating() == []
    blocked = [note for reason, note in done.events() if reason == "EvictionBlocked"]
    assert blocked == [
        "node web-b: evicting default/small would violate a PodDisruptionBudget; waiting"
    ]
    assert done.requeue_after == 5.0  # the budget's "not now": ask again later


async def test_a_drained_node_goes_with_its_vm_and_its_record(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    kept, leaving, objects = await scaling_down(cloud)

    done = await run(objects, cloud, tmp_path)

    assert done.timeline() == [
        f"cloud delete {leaving.id}",
        "delete Node web-b",
        "patch Node web-b",  # its termination finalizer off: it goes
        "update NodePool/status web",
    ]
    assert records(done.status_writes()[0]) == [("web-a", "running")]
    (release,) = [w for w in done.writes if w.kind == "Node" and w.verb == "patch"]
    assert release.body[-1] == {"op": "remove", "path": "/metadata/finalizers/0"}
    assert [vm.id for vm in cloud.snapshot().live] == [kept.id]


async def test_the_budget_holds_a_second_disruption(cloud: SimulatedCloud, tmp_path: Path) -> None:
    vms = await launched(cloud, "web-a", "web-b", "web-c")

    done = await run([pool(vms, target=1), *(node(vm) for vm in vms)], cloud, tmp_path)

    # the default budget (10% of 3 nodes: 1) lets one of the two surplus Nodes go now
    tainted = [w.name for w in done.writes if w.kind == "Node" and w.verb == "patch"]
    assert len(set(tainted)) == 1
    planned = done.status_writes()[0]
    assert [state for _, state in records(planned)].count("deleting") == 1
    assert planned["disruption"] == {"disrupting": 1, "allowed": 0}
    # the one chosen is empty: drained at once, its VM goes; the other stays for a later pass
    assert len([c for c in done.journal.mutating() if c.startswith("delete")]) == 1
    assert len(cloud.snapshot().live) == 2


async def test_a_node_still_draining_holds_the_next_one_by_the_budget(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b", "web-c")
    obj = pool(vms, target=1)
    obj["status"]["instances"][2]["state"] = "deleting"
    draining = disrupted(vms[2], since=format_time(time.time() - 60))  # within drainTimeout
    objects = [obj, node(vms[0]), node(vms[1]), draining, workload("x", vms[2])]

    done = await run(objects, cloud, tmp_path)

    # web-c, tainted in the cluster, takes the budget (1 of 3): nothing else is chosen
    assert [w.name for w in done.writes if w.kind == "Node"] == []
    assert "evict Pod/eviction default/x" in done.kinds()
    (status,) = done.status_writes()
    assert records(status) == [("web-a", "running"), ("web-b", "running"), ("web-c", "deleting")]
    assert status["disruption"] == {"disrupting": 1, "allowed": 0}
    assert done.journal.mutating() == []


# -- repair ---------------------------------------------------------------------------------------


async def test_one_unhealthy_node_is_repaired_at_a_time(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b", "web-c")
    healthy, sick1, sick2 = vms
    obj = pool(vms, target=3, disruption={"repair": {"maxUnhealthyPercent": 100}})
    nodes = [node(healthy), node(sick1, ready=False), node(sick2, ready=False)]

    done = await run([obj, *nodes], cloud, tmp_path)

    repairs = [note for reason, note in done.events() if reason == "NodeRepair"]
    assert len(repairs) == 1
    states = dict(records(done.status_writes()[0]))
    assert states["web-a"] == "running"
    assert sorted([states["web-b"], states["web-c"]]) == ["deleting", "running"]
    chosen = "web-b" if states["web-b"] == "deleting" else "web-c"
    assert f"node {chosen} of {chosen} unhealthy" in repairs[0]
    # replaced: a new intent beside it, created after the record
    new = [n for n, s in states.items() if s == "creating"]
    assert len(new) == 1
    timeline = done.timeline()
    assert timeline.index(f"cloud create {new[0]}") > timeline.index("update NodePool/status web")
    # the unhealthy Node has no pods: drained at once, its VM and Node go
    chosen_vm = sick1 if chosen == "web-b" else sick2
    assert f"cloud delete {chosen_vm.id}" in timeline
    assert f"delete Node {chosen}" in timeline


# -- expiry ---------------------------------------------------------------------------------------


async def aged(tmp_path: Path, ages: dict[str, float]) -> tuple[SimulatedCloud, list[Instance]]:
    """A simulated cloud whose VMs ``ages`` (name: seconds) were launched that long ago."""
    offset = [0.0]
    cloud = SimulatedCloud(
        tmp_path / "aged.sqlite", boot_seconds=0, clock=lambda: time.time() - offset[0]
    )
    vms = []
    for name, age in ages.items():
        offset[0] = age
        vms += await launched(cloud, name)
    offset[0] = 0.0
    return cloud, vms


async def test_an_expired_node_gets_its_replacement_before_any_drain(tmp_path: Path) -> None:
    cloud, (old, young) = await aged(tmp_path, {"web-a": 7200, "web-b": 60})
    obj = pool([old, young], target=2, disruption={"expireAfter": "1h"})
    objects = [obj, node(old), node(young), workload("x", old)]

    done = await run(objects, cloud, tmp_path)

    planned = done.status_writes()[0]
    states = dict(records(planned))
    assert (states["web-a"], states["web-b"]) == ("running", "running")
    (new,) = [n for n, s in states.items() if s == "creating"]
    timeline = done.timeline()
    assert timeline.index(f"cloud create {new}") > timeline.index("update NodePool/status web")
    # web-a keeps serving: not tainted, its pod not evicted, its VM kept
    assert [w.name for w in done.writes if w.kind == "Node"] == []
    assert not [k for k in done.kinds() if k.startswith("evict")]
    assert f"cloud delete {old.id}" not in timeline
    assert [r for r, _ in done.events()].count("Expiring") == 1
    expiring = condition(done.status_writes()[-1], "Expiring")
    assert (expiring["status"], expiring["reason"]) == ("True", "Replacing")
    assert "web-a" in expiring["message"]
    assert "web-b" not in expiring["message"]


def web_a_retired_first(done: in_process.Pass) -> None:
    """web-a (of web-a, web-b, web-c) is retired: tainted before its record says so and
    before its pod x is evicted; web-b and web-c are left alone."""
    planned = done.status_writes()[0]
    assert records(planned) == [("web-a", "deleting"), ("web-b", "running"), ("web-c", "running")]
    kinds = done.kinds()
    taint = kinds.index("patch Node web-a")
    assert taint < kinds.index("evict Pod/eviction default/x")
    assert taint < kinds.index("update NodePool/status web")  # tainted before recorded
    assert not [k for k in kinds if k.startswith("patch Node web-b") or "web-c" in k]


async def test_an_expired_node_is_drained_once_its_replacement_is_ready(tmp_path: Path) -> None:
    cloud, (old, young, new) = await aged(tmp_path, {"web-a": 7200, "web-b": 60, "web-c": 5})
    obj = pool([old, young, new], target=2, disruption={"expireAfter": "1h"})
    objects = [obj, node(old), node(young), node(new), workload("x", old)]

    done = await run(objects, cloud, tmp_path)

    web_a_retired_first(done)
    assert [r for r, _ in done.events()].count("Expired") == 1
    assert len(cloud.snapshot().live) == 3  # the pod is evicting: web-a's VM stays for now


# -- drift ----------------------------------------------------------------------------------------

OLD_AMI, NEW_AMI = "ami-0123456789abcdef0", "ami-0fedcba9876543210"


async def on_ami(cloud: SimulatedCloud, ami: str, *names: str) -> list[Instance]:
    """VMs of the pool launched (with the launch's record) from a class booting ``ami``
    (an SSM parameter when it starts with a slash)."""
    image = {"amiSsmParameter": ami} if ami.startswith("/") else {"amiId": ami}
    spec = parse_nodeclass(factories.nodeclass("c", amiFamily="Custom", **image)).spec
    return [
        await cloud.create(
            create_request(
                pool_name="web",
                pool_uid=UID,
                instance_type="m5.large",
                name=name,
                node_class=spec,
            )
        )
        for name in names
    ]


async def test_a_node_on_the_old_ami_is_marked_and_gets_its_replacement_first(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    old, young = await on_ami(cloud, OLD_AMI, "web-a", "web-b")
    obj = pool([old, young], target=2, nodeClassRef={"name": "c"})
    new_class = factories.nodeclass("c", amiId=NEW_AMI, amiFamily="Custom")
    objects = [obj, new_class, node(old), node(young), workload("x", old)]

    done = await run(objects, cloud, tmp_path)

    # both marked (the Node's annotation), neither tainted nor drained
    marked = [w for w in done.writes if w.kind == "Node"]
    assert sorted(w.name for w in marked) == ["web-a", "web-b"]
    assert all(w.body["metadata"]["annotations"][DRIFTED] == "ImageDrift" for w in marked)
    assert not [k for k in done.kinds() if k.startswith("evict")]
    # one replacement at a time (the default budget, 10% of 2 nodes), launched on the new AMI
    states = dict(records(done.status_writes()[0]))
    (new,) = [n for n, s in states.items() if s == "creating"]
    assert [vm.image for vm in cloud.snapshot().live if vm.name == new] == [NEW_AMI]
    assert [r for r, _ in done.events()].count("DriftDetected") == 2
    drifted = condition(done.status_writes()[-1], "Drifted")
    assert (drifted["status"], drifted["reason"]) == ("True", "Replacing")
    assert drifted["message"].startswith("2 node(s) drifted")
    # an amiId is its own answer: the cloud is not asked (a parameter is, once per period)
    assert not [c for c, _ in done.journal.calls if c.startswith("resolve_image")]


async def test_a_pool_on_its_parameters_ami_asks_for_it_once_and_nothing_drifts(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await on_ami(cloud, "/eks/ami", "web-a", "web-b", "web-c")
    obj = pool(vms, target=3, nodeClassRef={"name": "c"})
    ssm_class = factories.nodeclass("c", amiSsmParameter="/eks/ami", amiFamily="Custom")
    objects = [obj, ssm_class, *(node(vm) for vm in vms)]

    done = await run(objects, cloud, tmp_path)

    # one resolve for the pass's three nodes, not one per node
    asked = [c for c, _ in done.journal.calls if c.startswith("resolve_image")]
    assert asked == ["resolve_image resolve:ssm:/eks/ami"]
    assert [w for w in done.writes if w.kind == "Node"] == []
    assert "DriftDetected" not in [r for r, _ in done.events()]
    drifted = condition(done.status_writes()[-1], "Drifted")
    assert (drifted["status"], drifted["reason"]) == ("False", "NoneDrifted")


async def test_a_marked_node_is_drained_once_its_replacement_is_ready(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    old, young = await on_ami(cloud, OLD_AMI, "web-a", "web-b")
    (new,) = await on_ami(cloud, NEW_AMI, "web-c")
    obj = pool([old, young, new], target=2, nodeClassRef={"name": "c"})
    new_class = factories.nodeclass("c", amiId=NEW_AMI, amiFamily="Custom")
    marked = [node(old), node(young)]
    for n in marked:
        n["metadata"]["annotations"][DRIFTED] = "ImageDrift"
    objects = [obj, new_class, *marked, node(new), workload("x", old)]

    done = await run(objects, cloud, tmp_path)

    # the oldest goes; the other drifted node waits (the budget is taken by the one draining)
    web_a_retired_first(done)
    assert [r for r, _ in done.events()].count("Drifted") == 1
    assert "DriftDetected" not in [r for r, _ in done.events()], "marked already"


# -- a node class missing ------------------------------------------------------------------------


async def test_a_missing_node_class_is_named_in_the_degraded_condition(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    obj = pool(target=1, nodeClassRef={"name": "gone"})

    done = await run([obj], cloud, tmp_path)

    # the intent is recorded, then the class is looked for before any create
    assert isinstance(done.error, KubeloopError)
    assert "NodeClassUnavailable" in str(done.error)
    first, last = done.status_writes()
    assert records(first) == records(last)
    assert [state for _, state in records(last)] == ["creating"]
    degraded = condition(last, "Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "NodeClassUnavailable")
    assert "AwsNodeClass 'gone' not found" in degraded["message"]
    assert [r for r, _ in done.events()] == ["ScalingUp", "NodeClassUnavailable"]
    assert cloud.snapshot().instances == ()
    assert cloud.calls()["create"] == 0


# -- a pool being deleted -------------------------------------------------------------------------


async def test_a_deleted_pool_taints_all_its_nodes_before_evicting(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    a, b = vms
    objects = [
        pool(vms, target=2, deleting=True),
        node(a),
        node(b),
        workload("x", a),
        workload("y", b),
    ]

    done = await run(objects, cloud, tmp_path)

    assert done.timeline() == [
        "patch Node web-a",
        "patch Node web-b",
        "evict Pod/eviction default/x",
        "evict Pod/eviction default/y",
        "update NodePool/status web",
    ]
    assert "node web-a: pods terminating" in deleting_message(done)
    assert done.journal.mutating() == []
    assert done.requeue_after is not None


async def test_a_deleted_pool_with_drained_nodes_removes_node_and_vm_then_its_finalizer(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    a, b = vms
    done = await run([pool(vms, target=2, deleting=True), node(a), node(b)], cloud, tmp_path)

    timeline = done.timeline()
    assert timeline[:2] == ["patch Node web-a", "patch Node web-b"]
    assert timeline[2:] == [
        f"cloud delete {a.id}",
        "delete Node web-a",
        "patch Node web-a",
        f"cloud delete {b.id}",
        "delete Node web-b",
        "patch Node web-b",
        # then every VM id the pool had (terminating twice is harmless), its finalizer last
        *sorted([f"cloud delete {a.id}", f"cloud delete {b.id}"]),
        "patch NodePool web",
    ]
    assert cloud.snapshot().live == ()
    assert done.events()[-1] == ("Deleted", "deleted 2 node(s) and 2 VM(s)")
    assert done.requeue_after is None


async def test_a_deleted_pool_whose_eviction_a_budget_refuses_says_so_and_keeps_the_vm(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    (a,) = await launched(cloud, "web-a")
    objects = [pool([a], target=1, deleting=True), node(a), workload("x", a)]

    done = await run(objects, cloud, tmp_path, refuse_evictions=["default/x"])

    assert done.kinds() == [
        "patch Node web-a",
        "evict Pod/eviction default/x",
        "update NodePool/status web",
    ]
    assert "node web-a: 1 pod(s) held by a PodDisruptionBudget" in deleting_message(done)
    assert done.journal.mutating() == []
    assert [vm.id for vm in cloud.snapshot().live] == [a.id]
    assert done.requeue_after == 5.0


# -- what the pass finds on its way -------------------------------------------------------------


async def test_a_registered_node_is_adopted_with_the_pools_labels_and_finalizer(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    (vm,) = await launched(cloud, "web-a")
    obj = pool([vm], target=1, labels={"team": "a"})
    del obj["status"]["instances"][0]["nodeName"]  # not registered at the last pass
    registered = factories.node(
        vm.name,
        labels={POOL_LABEL: "web"},
        provider_id=provider_id(vm.id),
        ready=True,
    )

    done = await run([obj, registered], cloud, tmp_path)

    (sync,) = [w for w in done.writes if w.kind == "Node"]
    ops = {(op["op"], op["path"]): op.get("value") for op in sync.body}
    assert ops[("add", "/metadata/labels/team")] == "a"
    assert ops[("add", "/metadata/finalizers")] == [NODE_FINALIZER]
    (status,) = done.status_writes()
    assert status["instances"][0]["nodeName"] == "web-a"
    assert done.events() == [("Registered", f"node web-a of VM {vm.id} (web-a)")]
    assert done.journal.mutating() == []


async def test_a_tagged_vm_no_record_knows_is_adopted_before_any_launch(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    (leaked,) = await launched(cloud, "web-old")

    done = await run([pool(target=1)], cloud, tmp_path)

    assert done.journal.mutating() == []  # nothing launched: the tagged VM serves
    assert [(r["name"], r.get("instanceId")) for r in done.status_writes()[0]["instances"]] == [
        ("web-old", leaked.id)
    ]
    assert done.events()[0] == ("Adopted", f"VM {leaked.id} (web-old) tagged for the pool")


async def test_a_tagged_vm_beyond_the_target_is_collected_once_past_its_grace(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    kept, leaked = await launched(cloud, "web-a", "web-old")
    objects = [pool([kept], target=1), node(kept)]

    young = await run(objects, cloud, tmp_path)
    config = in_process.settings(tmp_path, gc_grace_seconds=0)
    old = await in_process.reconcile(objects, cloud, config, WEB, controller="nodepool")

    # within its grace it may be a create not recorded yet: kept, looked at when it ends
    assert young.journal.mutating() == []
    assert young.requeue_after is not None
    assert young.requeue_after <= in_process.settings(tmp_path).gc_grace_seconds
    assert old.journal.mutating() == [f"delete {leaked.id}"]
    assert [r for r, _ in old.events()] == ["GarbageCollected"]
    assert [vm.id for vm in cloud.snapshot().live] == [kept.id]


async def test_a_stopped_vm_is_started(cloud: SimulatedCloud, tmp_path: Path) -> None:
    (vm,) = await launched(cloud, "web-a")
    cloud.stop_behind_the_back(vm.id)

    done = await run([pool([vm], target=1), node(vm)], cloud, tmp_path)

    assert done.journal.mutating() == [f"start {vm.id}"]
    assert ("VMStopped", f"VM {vm.id} (web-a) was stopped; starting") in done.events()


@pytest.mark.parametrize(
    "hold",
    [
        pytest.param({"annotations": {"kubeloop.dev/do-not-disrupt": "true"}}, id="do-not-disrupt"),
        pytest.param({"owner": None}, id="no-controller"),  # a default blocker, scale-down only
    ],
)
async def test_a_blocked_node_sends_the_scale_down_to_another_node(
    cloud: SimulatedCloud, tmp_path: Path, hold: dict[str, Any]
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    busy, light = vms
    fields: dict[str, Any] = {"owner": RS, **hold}
    held = factories.pod(
        "small", namespace="default", node=light.name, cpu="100m", phase="Running", **fields
    )
    objects = [pool(vms, target=1), node(busy), node(light), workload("big", busy, cpu="1"), held]

    done = await run(objects, cloud, tmp_path)

    # the least used Node is held: the other goes, though its pod is bigger
    assert done.kinds()[:2] == ["patch Node web-a", "update NodePool/status web"]
    assert records(done.status_writes()[0]) == [("web-a", "deleting"), ("web-b", "running")]
    assert "evict Pod/eviction default/big" in done.kinds()
    assert not any("small" in kind for kind in done.kinds())


async def test_a_repair_drains_an_unhealthy_node_past_the_scale_down_blockers(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    healthy, sick = vms
    bare = factories.pod("bare", namespace="default", node=sick.name, phase="Running")
    obj = pool(vms, target=2, disruption={"repair": {"maxUnhealthyPercent": 100}})

    done = await run([obj, node(healthy), node(sick, ready=False), bare], cloud, tmp_path)

    # a pod no controller owns blocks a scale-down, not the repair of a Node gone bad
    assert "evict Pod/eviction default/bare" in done.kinds()
    assert f"delete {sick.id}" not in done.journal.mutating()  # its pod is still there
    states = dict(records(done.status_writes()[0]))
    assert states["web-b"] == "deleting"
    assert sorted(states.values()) == ["creating", "deleting", "running"]


async def test_a_scale_down_drain_past_its_timeout_is_given_up_and_the_node_kept(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    # tainted two hours ago: past the default drainTimeout (10m), its pod still there
    _, leaving, objects = await scaling_down(cloud)
    objects.append(workload("small", leaving))

    done = await run(objects, cloud, tmp_path)

    stamp, untaint = [w for w in done.writes if w.kind == "Node"]
    assert (stamp.name, untaint.name) == ("web-b", "web-b")
    assert DRAIN_TIMED_OUT_AT in stamp.body["metadata"]["annotations"]
    assert [op["op"] for op in untaint.body] == ["test", "remove"]
    assert records(done.status_writes()[-1]) == [("web-a", "running"), ("web-b", "running")]
    assert [r for r, _ in done.events()] == ["DrainTimedOut"] * 2  # on the pool and the Node
    assert done.journal.mutating() == []


async def test_after_a_drain_timed_out_the_next_named_node_is_tried(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b", "web-c")
    named = {UNNEEDED: "2026-01-01T12:00:00Z"}
    obj = pool(vms, target=2)
    obj["status"]["instances"][1]["state"] = "deleting"
    a, b, c = node(vms[0]), disrupted(vms[1]), node(vms[2])
    for chosen in (b, c):  # the Autoscaler named b and c; b's drain is two hours old
        chosen["metadata"]["annotations"].update(named)
    held, busier = workload("held", vms[1]), workload("busier", vms[2], cpu="500m")

    first = await run([obj, a, b, c, held, busier], cloud, tmp_path)

    # b is given up: stamped, untainted, kept (its record live again), said on pool and Node
    stamp, untaint = [w for w in first.writes if w.kind == "Node"]
    assert (stamp.name, untaint.name) == ("web-b", "web-b")
    assert [r for r, _ in first.events()] == ["DrainTimedOut"] * 2
    status = first.status_writes()[-1]
    assert records(status) == [("web-a", "running"), ("web-b", "running"), ("web-c", "running")]

    # the next pass reads the cluster as that one left it (b still named: the Autoscaler
    # takes its name off later): b rests, c, named, goes, not a (empty, first by name) nor
    # b (named, less used than c)
    b = node(vms[1])
    b["metadata"]["annotations"].update(named, **{DRAIN_TIMED_OUT_AT: stamp_of(stamp)})
    second = await run([pool(vms, target=2, status=status), a, b, c, held, busier], cloud, tmp_path)

    assert second.timeline()[:2] == ["patch Node web-c", "update NodePool/status web"]
    planned = records(second.status_writes()[0])
    assert planned == [("web-a", "running"), ("web-b", "running"), ("web-c", "deleting")]


def stamp_of(write: Any) -> str:
    """The drain-timed-out time a stamp write set."""
    return str(write.body["metadata"]["annotations"][DRAIN_TIMED_OUT_AT])


async def test_a_tainted_node_the_pool_keeps_is_untainted(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    vms = await launched(cloud, "web-a", "web-b")
    kept, chosen = vms
    # chosen and tainted, then the target went up again before its record said so
    tainted = disrupted(chosen)

    done = await run([pool(vms, target=2), node(kept), tainted], cloud, tmp_path)

    (untaint,) = [w for w in done.writes if w.kind == "Node"]
    assert untaint.name == "web-b"
    assert untaint.body[-1] == {"op": "remove", "path": "/spec/taints/0"}
    assert done.journal.mutating() == []
    assert not any(w.verb == "evict" for w in done.writes)


async def test_a_vm_whose_node_never_registers_is_replaced(
    cloud: SimulatedCloud, tmp_path: Path
) -> None:
    long_ago = time.time() - 3600
    past = SimulatedCloud(cloud.path, boot_seconds=0, clock=lambda: long_ago)
    (silent,) = await launched(past, "web-a")  # launched an hour ago, no Node since
    obj = pool([silent], target=1)
    del obj["status"]["instances"][0]["nodeName"]

    done = await run([obj], cloud, tmp_path)

    planned = done.status_writes()[0]
    states = dict(records(planned))
    assert states.pop("web-a") == "deleting"
    assert list(states.values()) == ["creating"]
    (new,) = states
    assert done.journal.mutating() == [f"create {new}", f"delete {silent.id}"]
    (reason, note), *_ = done.events()
    assert reason == "RegistrationTimeout"
    assert note == f"VM {silent.id} (web-a) registered no Node within 300s; replacing it"

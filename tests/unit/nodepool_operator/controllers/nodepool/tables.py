"""The records the NodePool controller's decision tables share: a pool, its instance
records, VMs and Nodes, and an observation of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nodepool_operator.api import InstanceRecord, NodePool, parse_nodepool, to_api
from nodepool_operator.cloud import Instance
from nodepool_operator.controllers.nodepool import decide
from nodepool_operator.controllers.nodepool.observe import Observation
from nodepool_operator.controllers.nodepool.records import NodePods, PoolNode
from nodepool_operator.scheduling import Resources, ScaleDownNode
from nodepool_operator.settings import OperatorSettings

NOW = 1_000_000.0
SETTINGS = OperatorSettings()
ROOM = Resources.from_resource_list({"cpu": "2", "memory": "4Gi", "pods": "110"})


def pool(target: int, records: Sequence[InstanceRecord] = (), **spec: Any) -> NodePool:
    body = {"instanceType": "m5.large", "targetNodes": target, **spec}
    return parse_nodepool(
        {
            "metadata": {"name": "p", "uid": "u-1", "generation": 1},
            "spec": body,
            "status": {"instances": [to_api(r) for r in records]},
        }
    )


def rec(name: str, state: str = "running", *, vm: bool = True) -> InstanceRecord:
    return InstanceRecord(name=name, instance_id=f"i-{name}" if vm else None, state=state)


def vm(name: str, state: str = "running", *, age: float = 10.0) -> Instance:
    return Instance(
        id=f"i-{name}",
        name=name,
        instance_type="m5.large",
        image="kubeloop-node",
        state=state,  # type: ignore[arg-type]
        private_ip="10.0.0.1",
        public_ip=None,
        tags={},
        created_at=NOW - age,
        launched_at=NOW - age,
    )


def node(name: str, **fields: Any) -> PoolNode:
    return PoolNode(name=f"n-{name}", instance_id=f"i-{name}", **fields)


def observed(
    the_pool: NodePool,
    nodes: Sequence[PoolNode] = (),
    vms: Sequence[Instance] = (),
    *,
    listed: Sequence[Instance] | None = None,
    pods: Mapping[str, NodePods] | None = None,
) -> Observation:
    by_name = {n.name: n for n in nodes}
    if pods is None:  # every Node empty, as read when a scale-down is looked at
        pods = {n.name: NodePods(ScaleDownNode(n.name, ROOM), empty=True) for n in nodes}
    return Observation(
        pool=the_pool,
        nodes=by_name,
        listed=tuple(vms if listed is None else listed),
        vms={v.id: v for v in vms},
        pods=pods,
    )


def states(decision: decide.Decision) -> dict[str, str]:
    """Each instance record's state after the decision, by name."""
    return {r.name: r.state for r in decision.records}

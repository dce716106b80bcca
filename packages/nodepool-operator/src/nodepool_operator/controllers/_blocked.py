"""Scale-down blockers for the controllers: a pool's switches, the PodDisruptionBudgets the
kube-system blocker needs, the status entries that report blocked nodes, and which nodes
chosen for removal to keep when a blocker turned up and another candidate can go instead.

The decision itself is :mod:`nodepool_operator.scheduling._blockers` (pure); this module only
reads its inputs and shapes its outputs. Everything but :func:`kube_system_budgets` is pure.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Final

from kubeloop import Client, Resource
from nodepool_operator.api import NodePool
from nodepool_operator.scheduling import (
    DefaultBlockers,
    PdbView,
    ScaleDownNode,
    Unremovable,
    node_blocker,
    pdb_view,
)

__all__ = [
    "PDBS",
    "SCALE_DOWN_BLOCKED",
    "blocked_nodes",
    "keep_blocked",
    "kube_system_budgets",
    "switches",
]

PDBS: Final = Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
#: The Event reason on a Node a blocker keeps from scale-down.
SCALE_DOWN_BLOCKED: Final = "ScaleDownBlocked"


def switches(pool: NodePool) -> DefaultBlockers:
    """The default blockers ``pool`` applies (``spec.disruption.blockers``)."""
    given = pool.spec.disruption.blockers
    return DefaultBlockers(
        pods_without_controller=given.pods_without_controller,
        pods_with_local_storage=given.pods_with_local_storage,
        kube_system_pods_without_pdb=given.kube_system_pods_without_pdb,
    )


async def kube_system_budgets(client: Client) -> list[PdbView]:
    """kube-system's PodDisruptionBudgets, read live (few, and only when a kube-system pod
    is on a node that might go)."""
    items, _ = await client.list_all(PDBS, namespace="kube-system")
    return [pdb_view(item) for item in items]


def blocked_nodes(
    nodes: Iterable[ScaleDownNode],
    holds: Mapping[str, str],
    *,
    switches: DefaultBlockers,
    budgets: Sequence[PdbView] = (),
) -> dict[str, Unremovable]:
    """What keeps each of ``nodes`` from a scale-down, by node name (only blocked ones).
    ``holds``: each Node's own hold annotation (:attr:`~nodepool_operator.scheduling.
    NodeView.hold`)."""
    found: dict[str, Unremovable] = {}
    for node in nodes:
        why = node_blocker(
            node.name,
            node.pods,
            hold=holds.get(node.name, ""),
            voluntary=True,
            switches=switches,
            budgets=budgets,
        )
        if why is not None:
            found[node.name] = why
    return found


def keep_blocked(
    retiring: Sequence[str], blocked: Collection[str], alternatives: Sequence[str]
) -> tuple[str, ...]:
    """Of the nodes being scaled down (``retiring``, in order), those to keep after all: the
    ``blocked`` ones, as many as there are ``alternatives`` (unblocked nodes that can go
    instead), so a blocker found after the choice moves the scale-down on to the next
    candidate rather than holding it. Without an alternative the blocked node stays chosen
    and its drain waits (the pool's target asks for one node fewer)."""
    held = [name for name in retiring if name in blocked]
    return tuple(held[: len(alternatives)])

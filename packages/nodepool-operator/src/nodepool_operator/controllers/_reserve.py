"""Reserved new nodes: the scale-up plan holds whatever the scheduler's scoring.

Why: the plan packs pods onto the fewest new nodes, often with no room to spare (three 28Gi
pods and three 3Gi ones on a 96Gi node). kube-scheduler does not know the plan: with its
default ``LeastAllocated`` scoring it spreads each pod onto the emptiest node that is Ready at
that moment, and one node that takes a fourth small pod before its third large one strands a
large pod, which costs a second scale-up a boot later (S2 in ``docs/benchmarks.md``).

By default the Autoscaler holds its plan by nominating each planned pod to its new node
(``controllers/autoscaler/_nominations.py``), which writes only the pods' status. The taint
below is then the *gate* of those nodes: the NodePool controller bootstraps every new node of
a pool an Autoscaler scales with it, so that no pod lands on a node before its nominations are
written (kube-scheduler clears a nomination on every failed attempt, and a node that opens the
moment it is Ready fills in the scheduler's order first); the Autoscaler nominates a Ready
gated node's pods and lifts the gates of a scale-up together. The :class:`Reservation`
bookkeeping below (which pods each new node is for, and its name) serves both uses; the
toleration patch serves only pools that still set the deprecated ``reserveNewNodes`` (and an
operator role granted ``pods`` ``patch``).

How, for a pool with ``spec.reserveNewNodes``: each new Node registers with the taint
``autoscaling.kubeloop.dev/reserved=<node name>:NoSchedule`` (the NodePool controller's
bootstrap), so no pod lands on it unless it tolerates exactly that node. When the Autoscaler
raises the target it remembers which pods the plan put on each new node (a *slot*); once the
NodePool controller has recorded the new VMs' names, it gives the slots those names in order
and adds to each pod the toleration of its node (the API allows adding tolerations to a live
pod). When every pod of a slot is bound (anywhere) or gone, or the node has been Ready for the
landing grace, the Autoscaler lifts the taint, and the node's spare room is everyone's. A
reserved node the Autoscaler holds no slot for (it restarted, or the node was not planned by
it) is lifted as soon as it is Ready; and should no Autoscaler run for the pool, the NodePool
controller opens a reserved node :data:`RESERVATION_BACKSTOP` landing graces after it became
Ready.

Pure: the state is a value, decisions are functions of it, of the pods' typed views and of
the Nodes' fields.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from nodepool_operator.controllers._node_fields import JsonPatch, NodeFields
from nodepool_operator.scheduling import PodView, Taint

__all__ = [
    "RESERVATION_BACKSTOP",
    "RESERVED_KEY",
    "Reservation",
    "lets_on",
    "lift_due",
    "lift_patch",
    "reservation_taint",
    "reserved_for",
    "toleration_patch",
]

#: The taint key of a reserved node; its value is the node's name.
RESERVED_KEY: Final = "autoscaling.kubeloop.dev/reserved"
#: The NodePool controller opens a reserved node this many landing graces after it became
#: Ready if nothing else did (no Autoscaler for the pool, or one that is down).
RESERVATION_BACKSTOP: Final = 4


def reservation_taint(node_name: str) -> dict[str, str]:
    return {"key": RESERVED_KEY, "value": node_name, "effect": "NoSchedule"}


def _toleration(node_name: str) -> dict[str, str]:
    return {"key": RESERVED_KEY, "operator": "Equal", "value": node_name, "effect": "NoSchedule"}


def reserved_for(node: NodeFields) -> str | None:
    """The node name a Node's reservation taint names, or None if it has none."""
    taint = node.taint(RESERVED_KEY)
    return None if taint is None else str(taint.get("value") or "")


def lets_on(pod: PodView, node_name: str) -> bool:
    """Whether ``pod`` may already land on the reserved ``node_name`` (it tolerates that
    node's reservation taint): then it needs no grant."""
    return pod.tolerates(Taint(RESERVED_KEY, "NoSchedule", node_name))


def toleration_patch(pod: PodView, node_name: str) -> JsonPatch:
    """The JSON patch that lets ``pod`` onto the reserved ``node_name``, made where it is
    written (the Autoscaler's act). Tolerations can only be added to a live pod, never
    changed, so this appends; a pod with none gets the list (an empty list in the object is
    replaced by it, which only adds)."""
    wanted = _toleration(node_name)
    if not pod.tolerations:
        return [{"op": "add", "path": "/spec/tolerations", "value": [wanted]}]
    return [{"op": "add", "path": "/spec/tolerations/-", "value": wanted}]


def lift_patch(node: NodeFields) -> JsonPatch:
    """Remove the reservation taint, guarded by a test of that very entry: a Node whose
    taints changed meanwhile makes the server refuse the patch instead of losing another
    taint, while its status heartbeats (which change its resourceVersion) do not."""
    taints = node.taints or ()
    at = next(i for i, t in enumerate(taints) if t.get("key") == RESERVED_KEY)
    return [
        {"op": "test", "path": f"/spec/taints/{at}", "value": taints[at]},
        {"op": "remove", "path": f"/spec/taints/{at}"},
    ]


@dataclass
class Reservation:
    """Per Autoscaler: the new nodes of its last scale-ups and the pods planned onto each.

    Attributes:
        slots: the pod uids of each planned new node, in plan order.
        names: slot index -> the node name it was given.
        known: the pool's VM names when the slots were made (their nodes are not new).
        granted: (pod uid, node name) pairs whose toleration was written, so that a pass
            whose cache has not seen that write yet does not append it again.
        unheld: the planned pods left without a nomination
            (:func:`~nodepool_operator.controllers.autoscaler._nominations.lead_kind`).
    """

    slots: list[tuple[str, ...]] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)
    known: frozenset[str] = frozenset()
    granted: set[tuple[str, str]] = field(default_factory=set)
    unheld: frozenset[str] = frozenset()

    def planned(
        self,
        slots: Sequence[Sequence[str]],
        known: Iterable[str],
        *,
        booting: Sequence[Sequence[str]] = (),
        settled: Container[str] = frozenset(),
        unheld: Iterable[str] = (),
    ) -> None:
        """Add the slots of a scale-up made when the pool had VMs ``known`` (record order);
        an empty one is dropped (a new node the plan put no pod on holds nothing).

        The VMs among ``known`` recorded since the last :meth:`assign` are the earlier
        scale-ups' (this one's are not made yet): they name the earlier slots first, or a
        second scale-up soon after the first would take them for old and leave those slots
        unnamed.

        ``booting``: the pods the same plan put on the nodes already requested but not yet
        registered and Ready (the plan's booting nodes, in its order), whose nodes are named
        in ``settled`` once they are. A later plan packs every pod still pending again, so
        its booting placements replace what the earlier slots of those nodes held; those
        beyond the earlier slots go to the pool's booting VMs that have none.

        ``unheld``: the pods of this plan to leave without a nomination; a pod planned again
        is held or not as the latest plan says."""
        known = list(known)
        self.assign(known)
        unnamed = [s for i, s in enumerate(self.slots) if i not in self.names]
        named = {self.names[i]: s for i, s in enumerate(self.slots) if i in self.names}
        if booting:
            fill = iter(tuple(b) for b in booting)
            for name in [n for n in named if n not in settled]:
                named[name] = next(fill, ())
            unnamed = [next(fill, ()) for _ in unnamed]
            for name in [n for n in known if n not in settled and n not in named]:
                named[name] = next(fill, ())
            unnamed += list(fill)
        self.slots = [*named.values(), *unnamed, *(tuple(s) for s in slots if s)]
        self.names = {i: name for i, name in enumerate(named)}
        self.known = self.known | frozenset(known)
        replanned = {k for s in (*slots, *booting) for k in s}
        self.unheld = frozenset(unheld) | (self.unheld - replanned)

    def holds_nominations(self) -> bool:
        """Whether a slot holds a pod to nominate (one not :attr:`unheld`): then the gates of
        its scale-up fall together, in a pass. With none, nothing is lost when a gate falls
        alone (a reserving pool's slots, which never have unheld pods, always hold)."""
        return any(key not in self.unheld for slot in self.slots for key in slot)

    def assign(self, vm_names: Sequence[str]) -> dict[str, tuple[str, ...]]:
        """Give unnamed slots the pool's new VM names (in the order given, which is the
        order the NodePool controller recorded them); returns every named slot by name."""
        taken = set(self.names.values())
        fresh = [n for n in vm_names if n not in self.known and n not in taken]
        for i in range(len(self.slots)):
            if i not in self.names and fresh:
                self.names[i] = fresh.pop(0)
        return {name: self.slots[i] for i, name in self.names.items()}

    def drop_unnamed(self) -> None:
        """Drop the slots no VM was recorded for: the scale-up they were planned for timed
        out (the cloud never made the VMs). Kept, they would take the names of the next
        scale-up's VMs, whose own pods would then have no slot."""
        keep = sorted(self.names)
        self.slots = [self.slots[i] for i in keep]
        self.names = {j: self.names[i] for j, i in enumerate(keep)}

    def forget(self, done: Collection[str]) -> None:
        """Drop the slots of the nodes named in ``done`` (lifted or gone)."""
        keep = [i for i in range(len(self.slots)) if self.names.get(i) not in done]
        self.slots = [self.slots[i] for i in keep]
        self.names = {j: self.names[i] for j, i in enumerate(keep) if i in self.names}
        self.granted = {(uid, name) for uid, name in self.granted if name not in done}
        self.unheld = self.unheld & {k for s in self.slots for k in s}


def lift_due(
    *,
    slot: Sequence[str] | None,
    waiting: Collection[str],
    ready_for: float | None,
    grace: float,
) -> bool:
    """Whether a reserved Node should be opened to every pod.

    ``slot``: the pods planned onto it (None: no slot, lift once Ready); ``waiting``: uids of
    pods still unbound; ``ready_for``: seconds the Node has been Ready (None: not Ready)."""
    if ready_for is None:
        return False
    if slot is None or ready_for >= grace:
        return True
    return not any(uid in waiting for uid in slot)

"""The scenario matrix: faults x the moment they strike x operators x topologies.

A scenario is a value (it names everything that varies, the seed included), so any one
of them can be re-run alone::

    python -m tests.faults.runner --only 'appconfig/single/sigkill@update#2'

"""

from __future__ import annotations

from dataclasses import dataclass

#: The NodePool operator draining nodes, one operator per path that drains (issue 22
#: item 9; tests/faults/disruption.py): an unneeded node's scale-down, a pool's deletion,
#: an unhealthy node's repair, an expired node's replacement. Each strikes mid-drain.
DISRUPTION_OPERATORS = ("scaledown", "pooldelete", "repair", "expiry")
#: The Autoscaler deleted while its pool's new nodes are gated (issue 25;
#: tests/faults/gates.py): only the NodePool controller's backstop opens them.
GATE_OPERATORS = ("gated",)
OPERATORS = (
    "appconfig",
    "nodepool",
    "instance",
    "tenant",
    "pack",
    *DISRUPTION_OPERATORS,
    *GATE_OPERATORS,
)
#: The operators every fault x moment x topology runs on; ``tenant`` (a cluster-scoped
#: owner of children in two namespaces, issue 23 bug 2) has scenarios of its own.
FULL_OPERATORS = OPERATORS[:3]

#: single: one process; two-instances: two processes, each scoped to its own namespace
#: (or label selector); leader-pair: two replicas of one scope with leader election.
TOPOLOGIES = ("single", "two-instances", "leader-pair")

#: What goes wrong. ``partition`` cuts every request of the operator (the leader, in a
#: leader pair) off; ``partition-hold`` too, but what it sent while cut off is
#: delivered when the partition heals (a queue that drains late: the write a deposed
#: leader must not land); ``sigkill`` kills it at a seeded moment and starts it again (a
#: leader pair's leader is not restarted: the standby must take over); ``meddle`` is
#: a second writer changing the scope's objects (an annotation, many times a second)
#: while the operator writes them: every write guarded by a resourceVersion, the
#: finalizer helpers' included, loses races (issue 23, bug 1); ``watch-lag`` holds the
#: operator's cluster-wide watch of a kind it also watches in one namespace, so the
#: namespaced informer is ahead (issue 23, bug 4).
FAULTS = (
    "none",
    "sigkill",
    "apiserver-restart",
    "etcd-restart",
    "storm-429",
    "storm-5xx",
    "watch-cut",
    "reset",
    "partition",
    "partition-hold",
    "meddle",
    "watch-lag",
    # the cache's read guarantees, on the Pack operator (tests/faults/cache_faults.py)
    "child-lag",
    "recreate-lag",
    "forbid-list",
    "list-hang",
    "lease-steal",
)

#: When it strikes: before the objects exist, right after they are created, or right
#: after their specs change (and one is deleted).
MOMENTS = ("start", "create", "update")


@dataclass(frozen=True, order=True)
class Scenario:
    operator: str
    topology: str
    fault: str
    moment: str
    seed: int = 0

    def __post_init__(self) -> None:
        for value, allowed in (
            (self.operator, OPERATORS),
            (self.topology, TOPOLOGIES),
            (self.fault, FAULTS),
            (self.moment, MOMENTS),
        ):
            if value not in allowed:
                raise ValueError(f"{value!r} is not one of {allowed}")

    @property
    def id(self) -> str:
        return f"{self.operator}/{self.topology}/{self.fault}@{self.moment}#{self.seed}"

    @property
    def reference(self) -> Scenario:
        """The fault-free run this one is compared with."""
        return Scenario(self.operator, self.topology, "none", "update", 0)

    @classmethod
    def parse(cls, text: str) -> Scenario:
        operator, topology, rest = text.split("/")
        fault, _, rest = rest.partition("@")
        moment, _, seed = rest.partition("#")
        return cls(operator, topology, fault, moment, int(seed or 0))


def full() -> list[Scenario]:
    """Every scenario ``make faults`` runs (at least 100)."""
    out: list[Scenario] = []
    for op in FULL_OPERATORS:
        out.append(Scenario(op, "single", "none", "update"))
        for fault in ("storm-429", "storm-5xx", "watch-cut", "reset", "partition"):
            for moment in MOMENTS:
                out.append(Scenario(op, "single", fault, moment))
        for moment in ("create", "update"):
            for seed in (1, 2, 3):
                out.append(Scenario(op, "single", "sigkill", moment, seed))
        for fault in ("apiserver-restart", "etcd-restart"):
            out.append(Scenario(op, "single", fault, "update"))
        out.append(Scenario(op, "single", "meddle", "start"))
        out.append(Scenario(op, "single", "meddle", "update"))
        out.append(Scenario(op, "two-instances", "none", "update"))
        for fault in ("sigkill", "storm-5xx", "watch-cut", "partition"):
            out.append(Scenario(op, "two-instances", fault, "update", 1))
        out.append(Scenario(op, "leader-pair", "none", "update"))
        for moment in ("create", "update"):
            for seed in (1, 2):
                out.append(Scenario(op, "leader-pair", "partition", moment, seed))
                out.append(Scenario(op, "leader-pair", "partition-hold", moment, seed))
            out.append(Scenario(op, "leader-pair", "sigkill", moment, 1))
    # children events from two namespaces while the owner's reconcile is slow, with no
    # fault and with a storm of 5xx (retries, requeues: more events, more reconciles)
    out.append(Scenario("tenant", "single", "none", "update"))
    out.append(Scenario("tenant", "single", "storm-5xx", "update"))
    out.append(Scenario("tenant", "single", "watch-lag", "start"))
    out += cache_reads()
    out += disruption()
    out += gates()
    return out


def disruption() -> list[Scenario]:
    """Each path that drains, struck mid-drain (``update``: the adapter's update returns
    once a node is tainted for removal) by a SIGKILL of the operator and by a restart of
    the apiserver; ``python -m tests.faults.runner --disruption`` runs only these."""
    out: list[Scenario] = []
    for op in DISRUPTION_OPERATORS:
        out.append(Scenario(op, "single", "none", "update"))
        out.append(Scenario(op, "single", "sigkill", "update", 1))
        out.append(Scenario(op, "single", "apiserver-restart", "update"))
    return out


def gates() -> list[Scenario]:
    """The Autoscaler gone while its new nodes are gated, struck (``update``: the adapter's
    update returns once every new Node registered gated) by a SIGKILL of the operator, a
    restart of the apiserver and a storm of 5xx (the backstop's lifts refused for a while)."""
    return [
        Scenario("gated", "single", "none", "update"),
        Scenario("gated", "single", "sigkill", "update", 1),
        Scenario("gated", "single", "apiserver-restart", "update"),
        Scenario("gated", "single", "storm-5xx", "update"),
    ]


def cache_reads() -> list[Scenario]:
    """The cache's read guarantees under faults (issue 23, bugs 3, 5 and 8), on the Pack
    operator: tests/faults/cache_faults.py."""
    return [
        Scenario("pack", "single", "none", "update"),
        Scenario("pack", "single", "child-lag", "create"),
        Scenario("pack", "single", "recreate-lag", "create"),
        Scenario("pack", "single", "forbid-list", "start"),
        Scenario("pack", "single", "list-hang", "update"),
        Scenario("pack", "leader-pair", "lease-steal", "update"),
    ]


def quick() -> list[Scenario]:
    """The subset ``make test`` runs: every fault kind, every operator, the two-instance
    and partitioned-leader scenarios included."""
    out: list[Scenario] = []
    for op in FULL_OPERATORS:
        out += [
            Scenario(op, "single", "sigkill", "update", 1),
            Scenario(op, "single", "storm-5xx", "update"),
            Scenario(op, "single", "storm-429", "create"),
            Scenario(op, "single", "watch-cut", "create"),
            Scenario(op, "single", "reset", "update"),
            Scenario(op, "single", "partition", "update"),
            Scenario(op, "two-instances", "none", "update"),
            Scenario(op, "leader-pair", "partition", "update", 1),
            Scenario(op, "leader-pair", "partition-hold", "update", 1),
        ]
    out.append(Scenario("appconfig", "single", "apiserver-restart", "update"))
    out.append(Scenario("instance", "single", "etcd-restart", "update"))
    # kubeloop's finalizer helpers under a second writer (issue 23, bug 1)
    out.append(Scenario("nodepool", "single", "meddle", "start"))
    # the cache's read-your-own-writes and a read of a kind it may not list (issue 23,
    # bugs 3 and 5): about 10 s each, after the Pack reference; an older incarnation's
    # delete arriving after our create of the same name (bug 3)
    out.append(Scenario("pack", "single", "child-lag", "create"))
    out.append(Scenario("pack", "single", "recreate-lag", "create"))
    out.append(Scenario("pack", "single", "forbid-list", "start"))
    # a drain killed midway (issue 22 item 9): a pool's deletion under a PDB that holds
    # evictions back, and the Autoscaler's scale-down beside a bare pod's blocked node
    out.append(Scenario("pooldelete", "single", "sigkill", "update", 1))
    out.append(Scenario("scaledown", "single", "sigkill", "update", 1))
    # the Autoscaler deleted while its new nodes are gated, the operator killed then: the
    # restarted NodePool controller's backstop opens them (issue 25)
    out.append(Scenario("gated", "single", "sigkill", "update", 1))
    return out

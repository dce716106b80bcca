"""Scale-down blockers as pure functions over fixed snapshots: each annotation, each default
blocker, the safe-to-evict override, the per-pool switches, the node annotations, and how the
removal order and the NodePool's re-choice use them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from nodepool_operator.api import parse_nodepool, to_api
from nodepool_operator.controllers._blocked import (
    blocked_nodes,
    keep_blocked,
    switches,
)
from nodepool_operator.controllers.autoscaler._status import unremovable
from nodepool_operator.scheduling import (
    DefaultBlockers,
    PdbView,
    RemovalReason,
    Resources,
    ScaleDownNode,
    UnremovableReason,
    held_by_budgets,
    needs_budgets,
    node_blocker,
    node_view,
    pdb_view,
    pod_blocker,
    pod_view,
    removal_order,
)
from nodepool_operator.scheduling._blockers import KUBE_SYSTEM
from tests import factories

GI = 2**30
NODE = Resources(cpu=4000, memory=16 * GI, pods=110)
REPLICASET = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid"}
DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "ds-uid"}
R = UnremovableReason


def pod(
    name: str = "p",
    *,
    namespace: str = "prod",
    owner: dict[str, Any] | None = REPLICASET,
    controller: bool = True,
    annotations: dict[str, str] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    labels: dict[str, str] | None = None,
    cpu: str = "100m",
    terminating: bool = False,
) -> Any:
    spec: dict[str, Any] = {"volumes": volumes} if volumes else {}
    return pod_view(
        factories.pod(
            name,
            namespace=namespace,
            uid=f"uid-{name}",
            owner=None if owner is None else {**owner, "controller": controller},
            annotations=annotations or None,
            labels=labels or None,
            deleting=terminating,
            cpu=cpu,
            **spec,
        )
    )


def node(name: str, *pods: Any) -> ScaleDownNode:
    return ScaleDownNode(name, NODE, {"kubernetes.io/hostname": name}, (), tuple(pods))


EMPTY_DIR = {"name": "scratch", "emptyDir": {}}
MEMORY_DIR = {"name": "tmp", "emptyDir": {"medium": "Memory"}}
HOST_PATH = {"name": "logs", "hostPath": {"path": "/var/log"}}
CONFIG = {"name": "cfg", "configMap": {"name": "app"}}
ALL_OFF = DefaultBlockers(
    pods_without_controller=False,
    pods_with_local_storage=False,
    kube_system_pods_without_pdb=False,
)
KUBE_SYSTEM_PDB = PdbView(KUBE_SYSTEM, pdb_view({"spec": {"selector": {}}}).selector)


# (case, pod, voluntary, switches, budgets, expected reason or None)
CASES: list[tuple[str, Any, bool, DefaultBlockers, tuple[PdbView, ...], R | None]] = [
    ("replicated pod", pod(), True, DefaultBlockers(), (), None),
    (
        "kubeloop do-not-disrupt",
        pod(annotations={"kubeloop.dev/do-not-disrupt": "true"}),
        True,
        DefaultBlockers(),
        (),
        R.DO_NOT_DISRUPT,
    ),
    (
        "karpenter do-not-disrupt",
        pod(annotations={"karpenter.sh/do-not-disrupt": "true"}),
        True,
        DefaultBlockers(),
        (),
        R.DO_NOT_DISRUPT,
    ),
    (
        "do-not-disrupt other than true",
        pod(annotations={"karpenter.sh/do-not-disrupt": "false"}),
        True,
        DefaultBlockers(),
        (),
        None,
    ),
    (
        "safe-to-evict false",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        True,
        DefaultBlockers(),
        (),
        R.NOT_SAFE_TO_EVICT,
    ),
    (
        "holds apply to involuntary removals too",
        pod(annotations={"karpenter.sh/do-not-disrupt": "true"}),
        False,
        DefaultBlockers(),
        (),
        R.DO_NOT_DISRUPT,
    ),
    (
        "holds cannot be switched off",
        pod(annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
        True,
        ALL_OFF,
        (),
        R.NOT_SAFE_TO_EVICT,
    ),
    (
        "safe-to-evict true does not lift a do-not-disrupt",
        pod(
            annotations={
                "kubeloop.dev/do-not-disrupt": "true",
                "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
            }
        ),
        True,
        DefaultBlockers(),
        (),
        R.DO_NOT_DISRUPT,
    ),
    ("bare pod", pod(owner=None), True, DefaultBlockers(), (), R.NOT_REPLICATED),
    (
        "owner that is not the controller",
        pod(controller=False),
        True,
        DefaultBlockers(),
        (),
        R.NOT_REPLICATED,
    ),
    ("bare pod, involuntary", pod(owner=None), False, DefaultBlockers(), (), None),
    (
        "bare pod, switched off",
        pod(owner=None),
        True,
        replace(DefaultBlockers(), pods_without_controller=False),
        (),
        None,
    ),
    (
        "bare pod, safe-to-evict true",
        pod(owner=None, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}),
        True,
        DefaultBlockers(),
        (),
        None,
    ),
    ("emptyDir on disk", pod(volumes=[EMPTY_DIR]), True, DefaultBlockers(), (), R.LOCAL_STORAGE),
    ("hostPath", pod(volumes=[HOST_PATH]), True, DefaultBlockers(), (), R.LOCAL_STORAGE),
    ("emptyDir in memory", pod(volumes=[MEMORY_DIR]), True, DefaultBlockers(), (), None),
    ("configMap volume", pod(volumes=[CONFIG]), True, DefaultBlockers(), (), None),
    (
        "local storage, switched off",
        pod(volumes=[EMPTY_DIR]),
        True,
        replace(DefaultBlockers(), pods_with_local_storage=False),
        (),
        None,
    ),
    (
        "local storage, safe-to-evict true",
        pod(
            volumes=[HOST_PATH],
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
        ),
        True,
        DefaultBlockers(),
        (),
        None,
    ),
    (
        "kube-system without a PDB",
        pod(namespace=KUBE_SYSTEM),
        True,
        DefaultBlockers(),
        (),
        R.UNMOVABLE_KUBE_SYSTEM,
    ),
    (
        "kube-system covered by a PDB",
        pod(namespace=KUBE_SYSTEM),
        True,
        DefaultBlockers(),
        (KUBE_SYSTEM_PDB,),
        None,
    ),
    (
        "kube-system, a PDB elsewhere does not count",
        pod(namespace=KUBE_SYSTEM),
        True,
        DefaultBlockers(),
        (replace(KUBE_SYSTEM_PDB, namespace="prod"),),
        R.UNMOVABLE_KUBE_SYSTEM,
    ),
    (
        "kube-system, switched off",
        pod(namespace=KUBE_SYSTEM),
        True,
        replace(DefaultBlockers(), kube_system_pods_without_pdb=False),
        (),
        None,
    ),
    (
        "kube-system, safe-to-evict true",
        pod(
            namespace=KUBE_SYSTEM,
            annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"},
        ),
        True,
        DefaultBlockers(),
        (),
        None,
    ),
    ("DaemonSet pod never blocks", pod(owner=DAEMONSET), True, DefaultBlockers(), (), None),
    (
        "DaemonSet pod with hostPath and do-not-disrupt",
        pod(
            owner=DAEMONSET,
            volumes=[HOST_PATH],
            annotations={"kubeloop.dev/do-not-disrupt": "true"},
        ),
        True,
        DefaultBlockers(),
        (),
        None,
    ),
    (
        "mirror pod never blocks",
        pod(owner=None, annotations={"kubernetes.io/config.mirror": "abc"}),
        True,
        DefaultBlockers(),
        (),
        None,
    ),
    (
        "terminating bare pod is already leaving",
        pod(owner=None, terminating=True),
        True,
        DefaultBlockers(),
        (),
        None,
    ),
]


@pytest.mark.parametrize(
    ("view", "voluntary", "switched", "budgets", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_pod_blocker(
    view: Any,
    voluntary: bool,
    switched: DefaultBlockers,
    budgets: tuple[PdbView, ...],
    expected: R | None,
) -> None:
    found = pod_blocker(view, voluntary=voluntary, switches=switched, budgets=budgets)
    assert (found[0] if found else None) == expected


def test_first_blocker_wins_in_the_order_holds_controller_storage_kube_system() -> None:
    both = pod(owner=None, volumes=[EMPTY_DIR])
    assert pod_blocker(both, voluntary=True) == (
        R.NOT_REPLICATED,
        "has no controller: evicted, it would not come back",
    )
    storage = pod(namespace=KUBE_SYSTEM, volumes=[EMPTY_DIR, HOST_PATH, MEMORY_DIR])
    assert pod_blocker(storage, voluntary=True) == (
        R.LOCAL_STORAGE,
        "has local storage (volume scratch, logs)",
    )


def test_a_pdb_selector_covers_by_labels_and_a_missing_selector_covers_nothing() -> None:
    web = pdb_view(
        {
            "metadata": {"namespace": KUBE_SYSTEM},
            "spec": {"selector": {"matchLabels": {"k8s-app": "dns"}}},
        }
    )
    dns = pod(namespace=KUBE_SYSTEM, labels={"k8s-app": "dns"})
    proxy = pod(namespace=KUBE_SYSTEM, labels={"k8s-app": "proxy"})
    assert web.covers(dns)
    assert not web.covers(proxy)
    no_selector = pdb_view({"metadata": {"namespace": KUBE_SYSTEM}, "spec": {}})
    assert not no_selector.covers(dns)
    assert pod_blocker(dns, voluntary=True, budgets=[web]) is None
    assert pod_blocker(proxy, voluntary=True, budgets=[web]) is not None


def budget(allowed: int, *, generation: int = 2, seen: int | None = 2, app: str = "web") -> Any:
    """A budget over ``app=<app>`` in prod whose status allows ``allowed`` disruptions, as
    computed for generation ``seen`` of it."""
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if seen is not None:
        status["observedGeneration"] = seen
    return {
        "metadata": {"namespace": "prod", "generation": generation},
        "spec": {"selector": {"matchLabels": {"app": app}}},
        "status": status,
    }


@pytest.mark.parametrize(
    ("obj", "allowed"),
    [
        pytest.param(budget(2), 2, id="computed"),
        pytest.param(budget(2, generation=3), 0, id="not-yet-for-this-generation"),
        pytest.param(budget(2, seen=None), 0, id="never-computed"),
        pytest.param({"metadata": {"namespace": "prod"}, "spec": {}}, 0, id="no-status"),
    ],
)
def test_a_budget_allows_what_its_status_says_for_its_generation_else_nothing(
    obj: dict[str, Any], allowed: int
) -> None:
    # the Eviction API refuses while the disruption controller has not caught up
    assert pdb_view(obj).disruptions_allowed == allowed


WEB = {"app": "web"}


@pytest.mark.parametrize(
    ("pods", "budgets", "held"),
    [
        pytest.param([pod("a", labels=WEB)], [], False, id="no-budget"),
        pytest.param([pod("a", labels=WEB)], [budget(1)], False, id="allowed"),
        pytest.param([pod("a", labels=WEB)], [budget(0)], True, id="none-allowed"),
        pytest.param(
            [pod("a", labels=WEB), pod("b", labels=WEB)], [budget(1)], True, id="two-of-one"
        ),
        pytest.param(
            [pod("a", labels=WEB), pod("b", labels=WEB, terminating=True)],
            [budget(1)],
            False,
            id="terminating-leaving-already",
        ),
        pytest.param([pod("a", labels=WEB)], [budget(1), budget(1)], True, id="two-budgets"),
        pytest.param([pod("a", labels={"app": "db"})], [budget(0)], False, id="not-covered"),
        pytest.param([pod("ds", owner=DAEMONSET, labels=WEB)], [budget(0)], False, id="daemonset"),
    ],
)
def test_held_by_budgets(pods: list[Any], budgets: list[Any], held: bool) -> None:
    assert held_by_budgets(pods, [pdb_view(b) for b in budgets]) is held


def test_node_annotations_hold_the_node_and_name_no_pod() -> None:
    for key in ("kubeloop.dev/do-not-disrupt", "karpenter.sh/do-not-disrupt"):
        view = node_view({"metadata": {"name": "n1", "annotations": {key: "true"}}})
        assert view.hold == key
        found = node_blocker("n1", [], hold=view.hold, voluntary=True)
        assert found is not None
        assert (found.reason, found.pod) == (R.NODE_ANNOTATED, None)
        assert found.note == f'node n1 is annotated {key}: "true"'
    ca = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
    assert node_view({"metadata": {"name": "n", "annotations": {ca: "true"}}}).hold == ca
    plain = {"metadata": {"name": "n", "annotations": {"karpenter.sh/do-not-disrupt": "no"}}}
    assert node_view(plain).hold == ""


def test_a_node_reports_its_first_blocking_pod_by_name_whatever_the_listing_order() -> None:
    pods = [
        pod("z", owner=None),
        pod("b", annotations={"karpenter.sh/do-not-disrupt": "true"}),
        pod("a"),
    ]
    for listing in (pods, pods[::-1]):
        found = node_blocker("n1", listing, voluntary=True)
        assert found is not None
        assert (str(found.pod), found.reason) == ("prod/b", R.DO_NOT_DISRUPT)
        assert found.note == 'node n1: pod prod/b is annotated karpenter.sh/do-not-disrupt: "true"'
    assert node_blocker("n1", [pod("a"), pod("c", owner=DAEMONSET)], voluntary=True) is None


def test_kube_system_budgets_are_read_only_when_they_can_matter() -> None:
    on = DefaultBlockers()
    assert needs_budgets([pod(namespace=KUBE_SYSTEM)], on)
    assert not needs_budgets([pod()], on)
    assert not needs_budgets([pod(namespace=KUBE_SYSTEM, owner=DAEMONSET)], on)
    safe = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}
    assert not needs_budgets([pod(namespace=KUBE_SYSTEM, annotations=safe)], on)
    assert not needs_budgets([pod(namespace=KUBE_SYSTEM)], ALL_OFF)


def test_blocked_nodes_are_never_unneeded_and_come_last_with_their_blocker() -> None:
    nodes = [
        node("bare", pod("b", owner=None)),  # least utilised, but a bare pod
        node("empty"),
        node("web", pod("w", cpu="500m")),
        node("held"),  # empty, but the Node itself is annotated
        node("storage", pod("s", volumes=[HOST_PATH])),
    ]
    holds = {"held": "karpenter.sh/do-not-disrupt"}
    blocked = blocked_nodes(nodes, holds, switches=DefaultBlockers())
    assert {name: why.reason for name, why in blocked.items()} == {
        "bare": R.NOT_REPLICATED,
        "held": R.NODE_ANNOTATED,
        "storage": R.LOCAL_STORAGE,
    }
    order = removal_order(nodes, blockers=blocked)
    assert [(d.node, d.reason) for d in order] == [
        ("empty", RemovalReason.EMPTY),
        ("web", RemovalReason.UNDERUTILIZED),
        ("held", RemovalReason.BLOCKED),  # blocked ones least utilised first
        ("bare", RemovalReason.BLOCKED),
        ("storage", RemovalReason.BLOCKED),
    ]
    assert [d.node for d in order if d.removable] == ["empty", "web"]
    assert order[3].blocked is blocked["bare"]
    # Switched off for the pool: the bare and local-storage nodes are ordinary candidates.
    relaxed = blocked_nodes(nodes, holds, switches=ALL_OFF)
    assert set(relaxed) == {"held"}
    reasons = {d.node: d.reason for d in removal_order(nodes, blockers=relaxed)}
    assert reasons["bare"] is RemovalReason.UNDERUTILIZED
    assert reasons["held"] is RemovalReason.BLOCKED


def test_without_blockers_given_the_pod_holds_still_block() -> None:
    order = removal_order([node("a", pod(annotations={"karpenter.sh/do-not-disrupt": "true"}))])
    assert order[0].reason is RemovalReason.BLOCKED
    assert order[0].blocked is not None
    assert order[0].blocked.reason is R.DO_NOT_DISRUPT
    # A bare pod is a default blocker: only when the caller applies them.
    order = removal_order([node("a", pod("x", owner=None)), node("c", pod("y"))])
    assert order[0].node == "a"
    assert order[0].reason is RemovalReason.UNDERUTILIZED


def test_the_pool_switches_come_from_spec_disruption_blockers() -> None:
    spec: dict[str, Any] = {"instanceType": "m5.large"}
    pool = parse_nodepool({"metadata": {"name": "p"}, "spec": spec})
    assert switches(pool) == DefaultBlockers()
    spec["disruption"] = {"blockers": {"podsWithLocalStorage": False}}
    pool = parse_nodepool({"metadata": {"name": "p"}, "spec": spec})
    assert switches(pool) == replace(DefaultBlockers(), pods_with_local_storage=False)
    spec["disruption"] = {
        "blockers": {
            "podsWithoutController": False,
            "podsWithLocalStorage": False,
            "kubeSystemPodsWithoutPDB": False,
        }
    }
    assert switches(parse_nodepool({"metadata": {"name": "p"}, "spec": spec})) == ALL_OFF


def test_status_lists_unremovable_nodes_by_name_with_pod_and_reason() -> None:
    nodes = [node("n2", pod("x", owner=None)), node("n1")]
    blocked = blocked_nodes(
        nodes, {"n1": "kubeloop.dev/do-not-disrupt"}, switches=DefaultBlockers()
    )
    # written from typed records: the same API objects the status had as dicts
    assert [to_api(entry) for entry in unremovable(blocked)] == [
        {
            "node": "n1",
            "reason": "NodeDoNotDisrupt",
            "message": 'node n1 is annotated kubeloop.dev/do-not-disrupt: "true"',
        },
        {
            "node": "n2",
            "reason": "NotReplicated",
            "pod": "prod/x",
            "message": "node n2: pod prod/x has no controller: evicted, it would not come back",
        },
    ]


@pytest.mark.parametrize(
    ("retiring", "blocked", "alternatives", "kept"),
    [
        (["a"], {"a"}, ["b"], ("a",)),  # a blocker turned up: the next candidate goes instead
        (["a"], {"a"}, [], ()),  # nothing else can go: a stays chosen, its drain waits
        (["a", "b"], {"a", "b"}, ["c"], ("a",)),  # one alternative: one kept
        (["a", "b"], {"b"}, ["c", "d"], ("b",)),  # an unblocked choice stays chosen
        (["a"], set(), ["b"], ()),
    ],
)
def test_keep_blocked(
    retiring: list[str], blocked: set[str], alternatives: list[str], kept: tuple[str, ...]
) -> None:
    assert keep_blocked(retiring, blocked, alternatives) == kept

"""What kube-scheduler v1.37.2 does with a ``status.nominatedNodeName`` someone else wrote.

The question behind issue 25 item 3: can the Autoscaler make the scheduler follow its plan by
nominating each pending pod to the new node planned for it (KEP-5278), instead of patching
tolerations onto users' pods? Each test runs on three control planes: the gates
``NominatedNodeNameForExpectation`` and ``ClearingNominatedNodeNameAfterBinding`` at their
defaults (both on in 1.37), both explicitly on, and both off. The nomination is written as
the Autoscaler would, a merge patch of the pod's status subresource built by
:func:`nodepool_operator.scheduling.nomination_patch`.

What they show (the source reading is in ``docs/simulation.md``, "Nominated nodes"):

* a nominated node that exists and fits is taken before any scoring, and room on it is held
  for the nominee against other pods of its priority, whatever the gates;
* a nominated node that fails the filters, or does not exist yet, is passed over: the pod
  lands on another node that fits, and the scheduler does not wait;
* a failed attempt drops the nomination (the preemption step answers "clear" when it finds
  no victims), so a nomination made while the planned node boots does not survive the first
  retry; a pod with ``preemptionPolicy: Never`` keeps it;
* written after the planned Node registered and before its not-ready taint goes, the
  nomination wins that node for its pod against pods that queued before it;
* the write needs ``pods/status`` ``patch``, not ``pods`` ``patch``;
* binding clears it in the apiserver only while ``ClearingNominatedNodeNameAfterBinding`` is
  on; with it off the bound pod keeps a stale nomination.
"""

from __future__ import annotations

import base64
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubeloop.envtest import (
    ControlPlane,
    ControlPlaneOptions,
    EnvtestError,
    RestClient,
    RestError,
)
from nodepool_operator.scheduling import nomination_patch

pytestmark = pytest.mark.integration

GATES = ("NominatedNodeNameForExpectation", "ClearingNominatedNodeNameAfterBinding")
#: name -> the feature gates given to kube-apiserver and kube-scheduler.
SETTINGS: dict[str, dict[str, bool]] = {
    "defaults": {},
    "on": dict.fromkeys(GATES, True),
    "off": dict.fromkeys(GATES, False),
}
POOL_LABEL = "test.kubeloop.dev/pool"


class Bed:
    """One control plane with one gate setting; each test gets its own pool label and
    namespace, so the Nodes of one test are invisible to the pods of another."""

    def __init__(self, cp: ControlPlane, setting: str) -> None:
        self.cp = cp
        self.setting = setting
        self.rest: RestClient = cp.rest()

    @property
    def clears_after_binding(self) -> bool:
        return self.setting != "off"  # the gate is on by default in 1.37

    def pool(self) -> Pool:
        return Pool(self, uuid.uuid4().hex[:8], self.cp.create_namespace("nnn"))


class Pool:
    def __init__(self, bed: Bed, label: str, ns: str) -> None:
        self.bed, self.label, self.ns = bed, label, ns
        self.rest = bed.rest

    def node(self, name: str, cpu: str, **kwargs: Any) -> str:
        full = f"{name}-{self.label}"
        self.bed.cp.create_node(full, cpu=cpu, labels={POOL_LABEL: self.label}, **kwargs)
        return full

    def pod(self, name: str, cpu: str, *, gated: bool = False, never_preempt: bool = False) -> None:
        spec: dict[str, Any] = {
            "nodeSelector": {POOL_LABEL: self.label},
            "containers": [
                {
                    "name": "app",
                    "image": "registry.invalid/app:1",
                    "resources": {"requests": {"cpu": cpu}},
                }
            ],
        }
        if gated:  # the scheduler leaves it alone until the gate goes
            spec["schedulingGates"] = [{"name": "test.kubeloop.dev/hold"}]
        if never_preempt:  # only a PriorityClass may say so; same priority as the default
            spec["priorityClassName"] = self._never_preempt_class()
        self.rest.post(
            f"/api/v1/namespaces/{self.ns}/pods",
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec},
        )

    def _never_preempt_class(self) -> str:
        name = f"never-preempt-{self.label}"
        self.rest.post(
            "/apis/scheduling.k8s.io/v1/priorityclasses",
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": 0,
                "preemptionPolicy": "Never",
            },
        )
        return name

    def get(self, name: str) -> dict[str, Any]:
        pod: dict[str, Any] = self.rest.get(f"/api/v1/namespaces/{self.ns}/pods/{name}")
        return pod

    def nominate(self, name: str, node: str) -> None:
        """Write the nomination as the Autoscaler would: the status subresource, with the
        pod's resourceVersion as a precondition."""
        patch = nomination_patch(self.get(name), node)
        assert patch is not None
        self.rest.request(
            "PATCH",
            f"/api/v1/namespaces/{self.ns}/pods/{name}/status",
            patch,
            content_type="application/merge-patch+json",
        )

    def ungate(self, name: str) -> None:
        self.rest.request(
            "PATCH",
            f"/api/v1/namespaces/{self.ns}/pods/{name}",
            [{"op": "remove", "path": "/spec/schedulingGates"}],
            content_type="application/json-patch+json",
        )

    def bound_to(self, name: str) -> str:
        return str(eventually(lambda: self.get(name)["spec"].get("nodeName"), f"{name} bound"))

    def unschedulable(self, name: str) -> dict[str, Any]:
        """The pod once the scheduler has reported it unschedulable among all the cluster's
        Nodes as they are now (its message counts the nodes it tried, so this waits for an
        attempt that saw the latest one); the condition and the nomination change in one
        status write."""
        nodes = len(self.rest.get("/api/v1/nodes")["items"])

        def seen() -> dict[str, Any] | None:
            pod = self.get(name)
            cond = _scheduled(pod)
            ok = cond and cond["status"] == "False" and f"0/{nodes} nodes" in cond["message"]
            return pod if ok else None

        pod: dict[str, Any] = eventually(seen, f"{name} unschedulable on {nodes} nodes")
        return pod


def _scheduled(pod: Mapping[str, Any]) -> dict[str, Any] | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond["type"] == "PodScheduled":
            return dict(cond)
    return None


def _nominated(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("nominatedNodeName") or "")


def eventually(fn: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Poll ``fn`` until it returns something truthy (the state, not a time, is asserted)."""
    deadline = time.monotonic() + timeout
    while True:
        result = fn()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for: {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module", params=list(SETTINGS), ids=lambda s: f"gates-{s}")
def bed(request: pytest.FixtureRequest) -> Iterator[Bed]:
    setting: str = request.param
    with ControlPlane(ControlPlaneOptions(feature_gates=SETTINGS[setting])) as cp:
        yield Bed(cp, setting)


def test_a_bad_gate_is_refused_before_any_component_starts(tmp_path: Path) -> None:
    cp = ControlPlane(ControlPlaneOptions(feature_gates={"Bad Gate": True}, dir=tmp_path))
    with pytest.raises(EnvtestError, match=r"ControlPlaneOptions\.feature_gates: .*Bad Gate"):
        cp.start()
    assert cp.pids == []
    assert not (tmp_path / "etcd").exists()


def test_the_gates_reach_the_components(bed: Bed) -> None:
    """The setting is really in force: the components' logs echo their flags at --v=1."""
    logs = bed.cp.dir / "logs"
    for component in ("kube-apiserver", "kube-scheduler"):
        text = (logs / f"{component}.log").read_text()
        flag = next(line for line in text.splitlines() if "FLAG: --feature-gates=" in line)
        for gate in GATES:
            if bed.setting == "defaults":
                assert gate not in flag, (component, flag)
            else:
                want = "true" if bed.setting == "on" else "false"
                assert f"{gate}={want}" in flag, (component, flag)


def test_a_nominated_node_that_fits_is_taken_over_a_better_scored_one(bed: Bed) -> None:
    pool = bed.pool()
    roomy = pool.node("roomy", cpu="16")  # LeastAllocated scores it higher for any pod
    small = pool.node("small", cpu="4")
    pool.pod("plain", cpu="1")
    assert pool.bound_to("plain") == roomy  # the control: scoring alone picks the roomy node

    pool.pod("nominee", cpu="1", gated=True)
    pool.nominate("nominee", small)
    assert _nominated(pool.get("nominee")) == small
    pool.ungate("nominee")
    assert pool.bound_to("nominee") == small
    left = _nominated(pool.get("nominee"))
    assert left == ("" if bed.clears_after_binding else small)

    # nominating a bound pod: refused while the apiserver clears after binding
    assert nomination_patch(pool.get("nominee"), roomy) is None  # ours never tries
    late = {"status": {"nominatedNodeName": roomy}}
    status = f"/api/v1/namespaces/{pool.ns}/pods/nominee/status"
    if bed.clears_after_binding:
        with pytest.raises(RestError) as refused:
            bed.rest.request("PATCH", status, late, content_type="application/merge-patch+json")
        assert refused.value.status == 422
        assert "already bound" in refused.value.body
    else:
        bed.rest.request("PATCH", status, late, content_type="application/merge-patch+json")
        assert _nominated(pool.get("nominee")) == roomy


def test_a_nomination_holds_room_on_its_node_against_other_pods(bed: Bed) -> None:
    """The nominator counts a nominated pod on its node: another pod of the same priority,
    which scoring would send there, goes elsewhere because the nominee's room is held."""
    control = bed.pool()
    control_b = control.node("b", cpu="4")
    control.node("a", cpu="3")
    control.pod("q", cpu="3")
    assert control.bound_to("q") == control_b  # more room left on b: LeastAllocated's pick

    pool = bed.pool()
    b = pool.node("b", cpu="4")
    a = pool.node("a", cpu="3")
    pool.pod("held", cpu="3", gated=True)  # never scheduled: only its nomination counts
    pool.nominate("held", b)
    pool.pod("q", cpu="3")
    assert pool.bound_to("q") == a
    assert pool.get("held")["spec"].get("nodeName") is None


def test_a_nominated_node_that_does_not_fit_is_passed_over(bed: Bed) -> None:
    pool = bed.pool()
    roomy = pool.node("roomy", cpu="16")
    tiny = pool.node("tiny", cpu="1")
    pool.pod("nominee", cpu="2", gated=True)
    pool.nominate("nominee", tiny)
    pool.ungate("nominee")
    assert pool.bound_to("nominee") == roomy
    assert _nominated(pool.get("nominee")) == ("" if bed.clears_after_binding else tiny)


def test_a_nominated_node_not_registered_yet_is_not_waited_for(bed: Bed) -> None:
    """The Autoscaler's case: the pod is unschedulable, the plan nominates it to a node that
    is still booting; another node that fits registers first and the pod lands there."""
    pool = bed.pool()
    pool.node("tiny", cpu="1")
    pool.pod("nominee", cpu="2")
    pool.unschedulable("nominee")
    planned = f"planned-{pool.label}"
    pool.nominate("nominee", planned)
    assert _nominated(pool.get("nominee")) == planned

    other = pool.node("other", cpu="4")
    assert pool.bound_to("nominee") == other
    assert _nominated(pool.get("nominee")) == ("" if bed.clears_after_binding else planned)
    pool.node("planned", cpu="4")  # registers at last; nobody is waiting for it
    assert pool.get("nominee")["spec"]["nodeName"] == other


@pytest.mark.parametrize("never_preempt", [False, True], ids=["preempting", "never-preempt"])
def test_a_failed_attempt_drops_the_nomination(bed: Bed, never_preempt: bool) -> None:
    """While the planned node boots, a Node that registers tainted (as every new Node does
    until the node lifecycle controller sees it Ready) sends the pod to another attempt,
    which fails; the preemption step finds no victims and answers "clear the nomination".
    A pod that may not preempt never gets that answer and keeps it."""
    pool = bed.pool()
    pool.node("tiny", cpu="1")
    pool.pod("nominee", cpu="2", never_preempt=never_preempt)
    pool.unschedulable("nominee")
    planned = f"planned-{pool.label}"
    pool.nominate("nominee", planned)

    booting = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    pool.node("booting", cpu="4", taints=booting)
    pod = pool.unschedulable("nominee")
    assert _nominated(pod) == (planned if never_preempt else "")

    later = pool.node("planned", cpu="4")
    assert pool.bound_to("nominee") == later  # the only node that fits, nominated or not


def test_a_nomination_written_while_its_node_boots_wins_the_node_when_it_opens(bed: Bed) -> None:
    """The order the Autoscaler can rely on: nominate after the planned Node registered
    (tainted not-ready; the attempt its registration caused is over) and before the taint
    goes. When it goes, every waiting pod is tried again in queue order; the nominee takes
    the node even though five pods of the same priority queued before it and each would
    fit alone: the nominator holds the nominee's room against them."""
    pool = bed.pool()
    pool.node("tiny", cpu="1")
    early = [f"early-{i}" for i in range(5)]
    for name in [*early, "nominee"]:
        pool.pod(name, cpu="3")
    for name in [*early, "nominee"]:
        pool.unschedulable(name)

    booting = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    planned = pool.node("planned", cpu="4", taints=booting)  # room for one of them
    pool.unschedulable("nominee")  # the attempt its registration caused
    pool.nominate("nominee", planned)
    assert _nominated(pool.get("nominee")) == planned

    _open(bed, planned)
    assert pool.bound_to("nominee") == planned
    for name in early:  # each was tried against the open node and did not fit
        pod = pool.unschedulable(name)
        assert pod["spec"].get("nodeName") is None


def test_nodes_opening_one_after_another_drop_later_nominations_until_renominated(
    bed: Bed,
) -> None:
    """Two planned nodes open one after the other, as booting nodes do. When the first opens,
    the second's nominee is tried again, its own node is still closed and the first one's
    room is held for that node's nominee: the attempt fails and drops the nomination. The
    Autoscaler must write it again before the second node opens; then it wins that node
    against pods that queued before it."""
    pool = bed.pool()
    pool.node("tiny", cpu="1")
    early = [f"early-{i}" for i in range(3)]
    for name in [*early, "first-nominee", "second-nominee"]:
        pool.pod(name, cpu="3")
    booting = [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]
    first = pool.node("first", cpu="4", taints=booting)
    second = pool.node("second", cpu="4", taints=booting)
    for name in [*early, "first-nominee", "second-nominee"]:
        pool.unschedulable(name)  # the attempts the registrations caused are over
    pool.nominate("first-nominee", first)
    pool.nominate("second-nominee", second)

    _open(bed, first)
    assert pool.bound_to("first-nominee") == first
    eventually(lambda: _nominated(pool.get("second-nominee")) == "", "the dropped nomination")
    assert pool.get("second-nominee")["spec"].get("nodeName") is None

    _keep_nominated(pool, "second-nominee", second)  # what the Autoscaler would do
    _open(bed, second)
    assert pool.bound_to("second-nominee") == second
    for name in early:
        assert pool.unschedulable(name)["spec"].get("nodeName") is None


def _keep_nominated(pool: Pool, name: str, node: str, *, settle: float = 3.0) -> None:
    """Nominate ``name`` to ``node`` and write it back each time the scheduler drops it (at
    most three times, as the Autoscaler's renominator does) until it has stood for ``settle``
    seconds: the attempt the first node's opening queued may come back from its backoff and
    drop it once more. (A wait for the scheduler to settle; nothing is asserted on time.)"""
    for _ in range(3):
        pool.nominate(name, node)
        deadline = time.monotonic() + settle
        while _nominated(pool.get(name)) == node:
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)
    raise AssertionError(f"the nomination of {name} to {node} dropped three times")


def _open(bed: Bed, node: str) -> None:
    """Lift a booting Node's taints, as the node lifecycle controller does once it is Ready."""
    bed.rest.request(
        "PATCH",
        f"/api/v1/nodes/{node}",
        {"spec": {"taints": None}},
        content_type="application/merge-patch+json",
    )


def test_nominating_needs_pods_status_patch_and_no_write_to_the_pod_spec(
    bed: Bed, tmp_path: Path
) -> None:
    """The grant the mechanism needs, against the real RBAC authorizer: an identity with
    ``pods/status`` ``patch`` (and the list and watch the Autoscaler has anyway; no get)
    nominates; the same identity may not touch the pod's spec (``reserveNewNodes`` needs
    ``pods`` ``patch``)."""
    pool = bed.pool()
    pool.node("tiny", cpu="1")
    pool.pod("nominee", cpu="2")
    pool.unschedulable("nominee")
    user = f"nominator-{pool.label}"
    bed.rest.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": user},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
            ],
        },
    )
    bed.rest.post(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": user},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": user,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    as_user = _client_for(bed.cp, user, tmp_path)
    planned = f"planned-{pool.label}"
    status = f"/api/v1/namespaces/{pool.ns}/pods/nominee/status"

    def nominated_as_user() -> bool:  # RBAC takes effect once the authorizer saw the binding
        patch = nomination_patch(pool.get("nominee"), planned)  # the admin reads for the test
        try:
            as_user.request("PATCH", status, patch, content_type="application/merge-patch+json")
        except RestError as err:
            if err.status != 403:
                raise
            return False
        return True

    eventually(nominated_as_user, "the nomination, written as the user")
    assert _nominated(pool.get("nominee")) == planned

    toleration = {"key": "x", "operator": "Exists"}
    with pytest.raises(RestError) as refused:
        as_user.request(
            "PATCH",
            f"/api/v1/namespaces/{pool.ns}/pods/nominee",
            [{"op": "add", "path": "/spec/tolerations/-", "value": toleration}],
            content_type="application/json-patch+json",
        )
    assert refused.value.status == 403


def _client_for(cp: ControlPlane, user: str, where: Path) -> RestClient:
    """A :class:`RestClient` with the client certificate of ``cp.kubeconfig_for(user)``:
    requests go to the API exactly as written (kubectl would GET first)."""
    config = yaml.safe_load(cp.kubeconfig_for(user).read_text())
    creds = config["users"][0]["user"]
    cert, key = where / f"{user}.crt", where / f"{user}.key"
    cert.write_bytes(base64.b64decode(creds["client-certificate-data"]))
    key.write_bytes(base64.b64decode(creds["client-key-data"]))
    return RestClient(cp.server, cp.ca_file, cert, key)

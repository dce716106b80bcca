"""The Actor's reservation writes. The deprecated reserveNewNodes under the default role (no
``pods`` patch): the refused toleration is told once as a Warning on the Autoscaler, the pass
goes on, nothing crashes. A gate's lift is sent only while the cache still shows the gate."""

from __future__ import annotations

from typing import Any

from kubeloop import Forbidden, Object
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._reserve import RESERVED_KEY, lift_patch
from nodepool_operator.controllers.autoscaler.act import RESERVE_FORBIDDEN, Actor
from nodepool_operator.controllers.autoscaler.decide import Grant, Lift
from nodepool_operator.controllers.autoscaler.observe import Raw
from nodepool_operator.scheduling import pod_view
from tests import factories


class RefusingClient:
    """Answers every pod patch as the apiserver's RBAC authorizer does without the grant."""

    def __init__(self) -> None:
        self.patches = 0

    async def patch(self, *args: Any, **kwargs: Any) -> Object:
        self.patches += 1
        raise Forbidden(403, "Forbidden", 'pods "w-0" is forbidden: cannot patch resource "pods"')


class Told:
    def __init__(self) -> None:
        self.warnings: list[tuple[str, str]] = []

    def normal(self, obj: Object, reason: str, note: str, **_: Any) -> None:
        raise AssertionError("no Normal event expected")

    def warning(self, obj: Object, reason: str, message: str, **_: Any) -> None:
        self.warnings.append((obj["metadata"]["name"], reason))


async def test_a_refused_toleration_is_told_once_and_stops_the_grants() -> None:
    client, told = RefusingClient(), Told()
    scaler = factories.autoscaler("as", pool="big", namespaces=["prod"])
    pods = {f"prod/w-{i}": factories.pod(f"w-{i}", namespace="prod") for i in range(3)}
    raw = Raw(scaler, factories.nodepool("big"), {}, pods)
    grants = [Grant(key, "vm-a", pod_view(pod)) for key, pod in pods.items()]
    granted, opened = await Actor(client, told).reserve(raw, grants, ())  # type: ignore[arg-type]
    assert (granted, opened) == ([], [])
    assert client.patches == 1  # the first refusal ends the grants of the pass
    assert told.warnings == [("as", RESERVE_FORBIDDEN)]


class RecordingClient:
    """Takes every patch, and records the Nodes patched."""

    def __init__(self) -> None:
        self.patched: list[str] = []

    async def patch(self, resource: Any, name: str, *args: Any, **kwargs: Any) -> Object:
        self.patched.append(name)
        return {}


async def test_a_lift_is_sent_only_while_the_cache_still_shows_the_gate() -> None:
    """A pass plans on a snapshot; the gates controller may have lifted a gate since. The
    lift reads the Node through the cache first (never older than our own writes) and sends
    nothing for a gate already gone, or a Node gone; a gate still there is lifted."""
    gate = factories.taint(RESERVED_KEY, value="vm-a")
    shown: dict[str, Object] = {
        "vm-a": factories.node("vm-a", taints=[gate]),
        "vm-b": factories.node("vm-b", taints=[]),  # its gate lifted meanwhile
    }

    async def read_node(name: str) -> Object | None:
        return shown.get(name)

    client = RecordingClient()
    actor = Actor(client, Told(), read_node)  # type: ignore[arg-type]
    lifts = [
        Lift(n, n, lift_patch(node_fields(factories.node(n, taints=[gate]))))
        for n in ("vm-a", "vm-b", "vm-c")
    ]
    raw = Raw(factories.autoscaler("as", pool="big"), factories.nodepool("big"), {}, {})
    granted, opened = await actor.reserve(raw, (), lifts)
    assert (granted, opened) == ([], ["vm-a"])
    assert client.patched == ["vm-a"]
    # without a reader every lift is sent, as before (the guarded patch is the check)
    unread = RecordingClient()
    assert await Actor(unread, Told()).open(lifts[1])  # type: ignore[arg-type]
    assert unread.patched == ["vm-b"]

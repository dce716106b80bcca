"""The deprecated reserveNewNodes under the default role (no ``pods`` patch): the refused
toleration is told once as a Warning on the Autoscaler, the pass goes on, nothing crashes."""

from __future__ import annotations

from typing import Any

from kubeloop import Forbidden, Object
from nodepool_operator.controllers.autoscaler.act import RESERVE_FORBIDDEN, Actor
from nodepool_operator.controllers.autoscaler.decide import Grant
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

"""Autoscaler: the Secrets, ConfigMaps, claims and storage classes pods need, looked up live."""

from __future__ import annotations

from typing import Any, cast

from kubeloop import Client, Forbidden, NotFound, Resource
from nodepool_operator.controllers.autoscaler._references import STORAGECLASSES, look_up
from nodepool_operator.scheduling import References, pod_view


class FakeReader:
    def __init__(
        self,
        objects: dict[tuple[str, str | None, str], dict[str, Any]],
        forbidden: frozenset[str] = frozenset(),
    ) -> None:
        self.objects = objects
        self.forbidden = forbidden
        self.gets: list[tuple[str, str | None, str]] = []

    async def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        key = (res.plural, namespace, name)
        self.gets.append(key)
        if res.plural in self.forbidden:
            raise Forbidden(403, "Forbidden", "no")
        if key not in self.objects:
            raise NotFound(404, "NotFound", f"{name} not found")
        return self.objects[key]


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "prod"},
        "spec": {"containers": [{"name": "c"}], **spec},
    }


def wanted(pod: dict[str, Any]) -> tuple[str, References]:
    """What the observe step hands ``look_up`` for one candidate."""
    view = pod_view(pod)
    return view.ref.namespace, view.references


async def test_look_up_gets_each_distinct_reference_once() -> None:
    claim = {
        "metadata": {"name": "data"},
        "spec": {"storageClassName": "late"},
        "status": {"phase": "Pending"},
    }
    reader = FakeReader(
        {
            ("secrets", "prod", "tls"): {"metadata": {"name": "tls"}},
            ("persistentvolumeclaims", "prod", "data"): claim,
            ("storageclasses", None, "late"): {
                "metadata": {"name": "late"},
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        }
    )
    vols = [
        {"name": "t", "secret": {"secretName": "tls"}},
        {"name": "m", "secret": {"secretName": "missing"}},
        {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
    ]
    lookup = await look_up(
        cast(Client, reader), [wanted(pod("a", volumes=vols)), wanted(pod("b", volumes=vols))]
    )
    assert lookup.secrets == {("prod", "tls")}
    assert set(lookup.claims) == {("prod", "data")}
    assert lookup.late_binding_classes == {"late"}
    assert sorted(reader.gets) == sorted(
        [
            ("secrets", "prod", "missing"),
            ("secrets", "prod", "tls"),
            ("persistentvolumeclaims", "prod", "data"),
            (STORAGECLASSES.plural, None, "late"),
        ]
    )


async def test_look_up_assumes_present_what_it_may_not_read() -> None:
    reader = FakeReader({}, forbidden=frozenset({"secrets"}))
    lookup = await look_up(
        cast(Client, reader),
        [wanted(pod("a", volumes=[{"name": "t", "secret": {"secretName": "tls"}}]))],
    )
    assert lookup.secrets == {("prod", "tls")}

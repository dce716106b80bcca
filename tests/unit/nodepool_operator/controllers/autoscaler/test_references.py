"""Autoscaler: the Secrets, ConfigMaps, claims and storage classes pods need, looked up live."""

from __future__ import annotations

from typing import Any, cast

from kubeloop import Client, Forbidden, NotFound, Resource
from nodepool_operator.controllers.autoscaler._decode import pod_needs
from nodepool_operator.controllers.autoscaler._references import STORAGECLASSES, look_up
from tests import factories


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
        cast(Client, reader), [pod_needs(pod("a", volumes=vols)), pod_needs(pod("b", volumes=vols))]
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
        [pod_needs(pod("a", volumes=[{"name": "t", "secret": {"secretName": "tls"}}]))],
    )
    assert lookup.secrets == {("prod", "tls")}


async def test_a_bound_claims_volume_is_read_for_its_zones() -> None:
    """Bound claims' volumes are read once each; a volume pinning no zone is left out."""
    pinned = factories.persistent_volume("pv-b", zone="zone-b")
    legacy = factories.persistent_volume(
        "pv-c", zone="zone-c", key="failure-domain.beta.kubernetes.io/zone"
    )
    anywhere = factories.persistent_volume("pv-any")
    reader = FakeReader(
        {
            ("persistentvolumeclaims", "prod", name): factories.claim(
                name, namespace="prod", volume=volume, phase="Bound"
            )
            for name, volume in (("b", "pv-b"), ("c", "pv-c"), ("any", "pv-any"))
        }
        | {
            ("persistentvolumes", None, v["metadata"]["name"]): v
            for v in (pinned, legacy, anywhere)
        }
    )
    vols = [{"name": n, "persistentVolumeClaim": {"claimName": n}} for n in ("b", "c", "any")]
    needs = pod_needs(pod("a", volumes=vols))
    lookup = await look_up(cast(Client, reader), [needs, pod_needs(pod("a2", volumes=vols))])
    assert sorted(k for k in reader.gets if k[0] == "persistentvolumes") == [
        ("persistentvolumes", None, "pv-any"),
        ("persistentvolumes", None, "pv-b"),
        ("persistentvolumes", None, "pv-c"),
    ]
    assert sorted(lookup.volume_zones) == ["pv-b", "pv-c"]
    zones = [[str(r) for t in terms for r in t.expressions] for terms in lookup.zones_of(needs)]
    assert zones == [
        ["topology.kubernetes.io/zone In [zone-b]"],
        ["topology.kubernetes.io/zone In [zone-c]"],
    ]

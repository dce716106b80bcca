"""The API semantics the project relies on, pinned against the real kube-apiserver.

These are the seeds' facts: generation vs resourceVersion, the status
subresource's separation from spec, and 409 on a stale copy.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.envtest import ControlPlane, RestClient, RestError
from tests.integration.widgets import WIDGET_CRD, WIDGETS, widget

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def rest(kube_control_plane: ControlPlane) -> RestClient:
    kube_control_plane.install_crds([WIDGET_CRD])
    return kube_control_plane.rest()


def _path(ns: str, name: str | None = None, sub: str | None = None) -> str:
    return WIDGETS.path(ns, name, sub)


def _meta(obj: dict[str, Any]) -> tuple[int, str]:
    return obj["metadata"]["generation"], obj["metadata"]["resourceVersion"]


def test_spec_change_bumps_generation_and_resource_version(
    rest: RestClient, kube_namespace: str
) -> None:
    created = rest.post(_path(kube_namespace), widget("w"))
    gen0, rv0 = _meta(created)
    created["spec"]["size"] = 2
    updated = rest.request("PUT", _path(kube_namespace, "w"), created)
    gen1, rv1 = _meta(updated)
    assert gen1 == gen0 + 1
    assert rv1 != rv0


@pytest.mark.parametrize(
    "patch",
    [
        {"metadata": {"labels": {"team": "a"}}},
        {"metadata": {"annotations": {"note": "x"}}},
    ],
    ids=["label", "annotation"],
)
def test_metadata_change_bumps_only_resource_version(
    rest: RestClient, kube_namespace: str, patch: dict[str, Any]
) -> None:
    gen0, rv0 = _meta(rest.post(_path(kube_namespace), widget("w")))
    patched = rest.request(
        "PATCH", _path(kube_namespace, "w"), patch, content_type="application/merge-patch+json"
    )
    gen1, rv1 = _meta(patched)
    assert gen1 == gen0
    assert rv1 != rv0


def test_status_change_bumps_only_resource_version(rest: RestClient, kube_namespace: str) -> None:
    gen0, rv0 = _meta(rest.post(_path(kube_namespace), widget("w")))
    patched = rest.request(
        "PATCH",
        _path(kube_namespace, "w", "status"),
        {"status": {"phase": "Ready"}},
        content_type="application/merge-patch+json",
    )
    gen1, rv1 = _meta(patched)
    assert patched["status"] == {"phase": "Ready"}
    assert gen1 == gen0
    assert rv1 != rv0


def test_status_write_cannot_change_spec(rest: RestClient, kube_namespace: str) -> None:
    obj = rest.post(_path(kube_namespace), widget("w", size=1))
    obj["spec"]["size"] = 99
    obj["status"] = {"phase": "Ready"}
    result = rest.request("PUT", _path(kube_namespace, "w", "status"), obj)
    assert result["spec"]["size"] == 1
    assert result["status"]["phase"] == "Ready"
    assert rest.get(_path(kube_namespace, "w"))["spec"]["size"] == 1


def test_main_resource_write_cannot_change_status(rest: RestClient, kube_namespace: str) -> None:
    rest.post(_path(kube_namespace), widget("w"))
    rest.request(
        "PATCH",
        _path(kube_namespace, "w", "status"),
        {"status": {"phase": "Ready"}},
        content_type="application/merge-patch+json",
    )
    obj = rest.get(_path(kube_namespace, "w"))
    obj["status"] = {"phase": "Hacked"}
    obj["spec"]["size"] = 5
    result = rest.request("PUT", _path(kube_namespace, "w"), obj)
    assert result["spec"]["size"] == 5
    assert result["status"]["phase"] == "Ready"


def test_stale_resource_version_gets_409_conflict(rest: RestClient, kube_namespace: str) -> None:
    stale = rest.post(_path(kube_namespace), widget("w"))
    fresh = dict(stale, spec={"size": 2})
    rest.request("PUT", _path(kube_namespace, "w"), fresh)  # someone else wins the race
    stale["status"] = {"phase": "Ready"}
    with pytest.raises(RestError) as info:
        rest.request("PUT", _path(kube_namespace, "w", "status"), stale)
    assert info.value.status == 409
    assert '"reason":"Conflict"' in info.value.body.replace(" ", "")

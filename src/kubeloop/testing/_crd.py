"""Small CustomResourceDefinitions for tests and examples."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubeloop._resource import Resource

_SCOPES = ("Namespaced", "Cluster")


@dataclass(frozen=True)
class ScaleSpec:
    """A CRD's ``scale`` subresource: where the replica counts (and the selector) live."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None


def simple_crd(
    group: str,
    kind: str,
    *,
    plural: str | None = None,
    version: str = "v1",
    scope: str = "Namespaced",
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
    scale: ScaleSpec | None = None,
) -> dict[str, Any]:
    """A CRD with one served and stored version, ready for ``install_crds``.

    ``spec`` and ``status`` are the openAPI ``properties`` of the two objects. Without
    ``spec`` the spec keeps any fields (``x-kubernetes-preserve-unknown-fields``); with
    ``status`` (even ``{}``) the CRD has a status subresource and a ``status`` schema,
    without it neither. ``plural`` defaults to the lower-cased kind plus ``s``.

    ```pycon
    >>> crd = simple_crd(
    ...     "example.dev",
    ...     "Widget",
    ...     spec={"size": {"type": "integer", "minimum": 0}},
    ...     status={"phase": {"type": "string", "enum": ["Pending", "Ready"]}},
    ... )
    >>> crd["metadata"]["name"]
    'widgets.example.dev'
    >>> resource_of(crd)
    Resource(group='example.dev', version='v1', plural='widgets', kind='Widget', namespaced=True)
    ```
    """
    if scope not in _SCOPES:
        raise ValueError(f"scope must be one of {_SCOPES}, not {scope!r}")
    plural = plural or f"{kind.lower()}s"
    spec_schema: dict[str, Any] = (
        {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if spec is None
        else {"type": "object", "properties": _copy(spec)}
    )
    properties: dict[str, Any] = {"spec": spec_schema}
    subresources: dict[str, Any] = {}
    if status is not None:
        properties["status"] = {"type": "object", "properties": _copy(status)}
        subresources["status"] = {}
    if scale is not None:
        subresources["scale"] = {
            "specReplicasPath": scale.spec_replicas_path,
            "statusReplicasPath": scale.status_replicas_path,
        }
        if scale.label_selector_path is not None:
            subresources["scale"]["labelSelectorPath"] = scale.label_selector_path
    served: dict[str, Any] = {"name": version, "served": True, "storage": True}
    if subresources:
        served["subresources"] = subresources
    served["schema"] = {"openAPIV3Schema": {"type": "object", "properties": properties}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [served],
        },
    }


def resource_of(crd: Mapping[str, Any], version: str | None = None) -> Resource:
    """The :class:`~kubeloop.Resource` a CRD defines, at ``version`` (default: the
    storage version)."""
    spec = crd["spec"]
    if version is None:
        version = next(v["name"] for v in spec["versions"] if v.get("storage"))
    elif not any(v["name"] == version for v in spec["versions"]):
        raise ValueError(f"{crd['metadata']['name']} has no version {version!r}")
    names = spec["names"]
    return Resource(
        spec["group"],
        version,
        names["plural"],
        names["kind"],
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
    )


def _copy(properties: Mapping[str, Any]) -> dict[str, Any]:
    return {name: copy.deepcopy(schema) for name, schema in properties.items()}

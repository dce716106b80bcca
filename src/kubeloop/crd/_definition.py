"""A kind as served: its names, scope, versions (each with its type, printer columns and
subresources, one of them stored) and the ``apiextensions.k8s.io/v1``
CustomResourceDefinition built from that."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubeloop._resource import Resource
from kubeloop.crd._model import fields
from kubeloop.crd._schema import kind_schema


@dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` (``additionalPrinterColumns``); ``priority`` 1 and up
    shows only with ``-o wide``."""

    name: str
    json_path: str
    type: str
    description: str
    priority: int = 0
    format: str | None = None

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "description": self.description,
            "format": self.format,
            "jsonPath": self.json_path,
            "name": self.name,
            "priority": self.priority,
            "type": self.type,
        }
        if not self.priority:
            del out["priority"]  # the apiserver's default; leaving it out keeps the YAML short
        if self.format is None:
            del out["format"]
        return out


#: The column every kind shows last.
AGE = PrinterColumn("Age", ".metadata.creationTimestamp", "date", "Time since creation.")


@dataclass(frozen=True)
class Scale:
    """The scale subresource (``kubectl scale``, the HorizontalPodAutoscaler, anything that
    speaks autoscaling/v1 Scale): where the wanted and the observed replicas live."""

    spec_replicas_path: str
    status_replicas_path: str
    label_selector_path: str | None = None

    def to_api(self) -> dict[str, str]:
        out = {
            "labelSelectorPath": self.label_selector_path,
            "specReplicasPath": self.spec_replicas_path,
            "statusReplicasPath": self.status_replicas_path,
        }
        return {k: v for k, v in out.items() if v is not None}


@dataclass(frozen=True)
class Version:
    """One version of a kind: its root type (with ``metadata`` and ``spec``; a ``status``
    field brings the status subresource), whether the apiserver serves it, and how
    ``kubectl get`` shows it."""

    name: str
    type: type
    columns: tuple[PrinterColumn, ...] = (AGE,)
    scale: Scale | None = None
    served: bool = True
    deprecated: bool = False
    deprecation_warning: str | None = None

    @property
    def has_status(self) -> bool:
        return any(f.json == "status" for f in fields(self.type))


@dataclass(frozen=True)
class CustomResource:
    """A kind, and the CRD that serves it.

    With several versions, ``storage`` names the one etcd keeps (exactly one, as the
    apiserver demands); with one, it is that one. ``conversion`` is the CRD's
    ``spec.conversion`` as written (``None``: the apiserver's default, ``None`` strategy,
    which only rewrites ``apiVersion``: enough while the versions' schemas agree).
    """

    group: str
    kind: str
    plural: str
    versions: tuple[Version, ...]
    storage: str | None = None
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    conversion: Mapping[str, Any] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        names = [v.name for v in self.versions]
        if not names:
            raise ValueError(f"{self.kind}: a kind needs a version")
        if len(set(names)) != len(names):
            raise ValueError(f"{self.kind}: versions {names} repeat a name")
        if self.storage is None and len(names) > 1:
            raise ValueError(f"{self.kind}: name the storage version, one of {names}")
        if self.storage is not None and self.storage not in names:
            raise ValueError(f"{self.kind}: storage version {self.storage!r} is not in {names}")
        if not self.version(self.storage_version).served:
            raise ValueError(
                f"{self.kind}: the storage version {self.storage_version} is not served"
            )

    @property
    def storage_version(self) -> str:
        return self.storage or self.versions[0].name

    @property
    def name(self) -> str:
        """The CRD's name, ``plural.group``."""
        return f"{self.plural}.{self.group}"

    def version(self, name: str) -> Version:
        for v in self.versions:
            if v.name == name:
                return v
        raise KeyError(f"{self.kind} has no version {name!r}")

    def resource(self, version: str | None = None) -> Resource:
        """The :class:`~kubeloop.Resource` a client reads and writes it by (the storage
        version unless told)."""
        return Resource(
            self.group,
            version or self.storage_version,
            self.plural,
            self.kind,
            namespaced=self.namespaced,
        )

    def definition(self) -> dict[str, Any]:
        """The CustomResourceDefinition, as decoded JSON (the same on every call).

        Raises:
            TypeError: a version's type cannot be a schema (naming ``Class.field``).
        """
        names: dict[str, Any] = {}
        if self.categories:
            names["categories"] = list(self.categories)
        names |= {"kind": self.kind, "listKind": f"{self.kind}List", "plural": self.plural}
        if self.short_names:
            names["shortNames"] = list(self.short_names)
        names["singular"] = self.kind.lower()
        spec: dict[str, Any] = {}
        if self.conversion is not None:
            spec["conversion"] = dict(self.conversion)
        spec |= {
            "group": self.group,
            "names": names,
            "scope": "Namespaced" if self.namespaced else "Cluster",
            "versions": [self._version(v) for v in self.versions],
        }
        return {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": self.name},
            "spec": spec,
        }

    def _version(self, version: Version) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if version.columns:
            out["additionalPrinterColumns"] = [c.to_api() for c in version.columns]
        if version.deprecated:
            out["deprecated"] = True
        if version.deprecation_warning is not None:
            out["deprecationWarning"] = version.deprecation_warning
        out |= {
            "name": version.name,
            "schema": {"openAPIV3Schema": kind_schema(version.type)},
            "served": version.served,
            "storage": version.name == self.storage_version,
        }
        subresources: dict[str, Any] = {}
        if version.scale is not None:
            subresources["scale"] = version.scale.to_api()
        if version.has_status:
            subresources["status"] = {}
        if subresources:
            out["subresources"] = subresources
        return out

"""Resource types: how a kind maps to API paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: Objects are plain decoded JSON: kubeloop never drops unknown fields.
Object = dict[str, Any]


class HashedOnce:
    """A slot for a frozen value's hash, computed once in its ``__post_init__``.

    A request or a resource keys the workqueue's, the rate limiter's and the cache's
    tables, looked up about ten times per reconcile; a frozen dataclass's own
    ``__hash__`` hashes a new tuple in Python code on every lookup. A slot, not a
    dataclass field: ``fields()``, ``asdict`` and encoders never see it. Subclasses
    pickle through ``__reduce__`` (their constructor), so another process, whose
    string hashes differ, computes its own."""

    __slots__ = ("_hash",)
    _hash: int


@dataclass(frozen=True, order=True)
class Resource(HashedOnce):
    """One API resource type (group, version, plural) and what it is called.

    ``Resource("apps", "v1", "deployments", "Deployment")``; the core group is ``""``.
    """

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    def __post_init__(self) -> None:
        key = (self.group, self.version, self.plural, self.kind, self.namespaced)
        object.__setattr__(self, "_hash", hash(key))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[Any, ...]:
        return (Resource, (self.group, self.version, self.plural, self.kind, self.namespaced))

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self) -> str:
        """``plural.group`` (``pods`` for the core group), as kubectl prints it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{self.plural}"
        if name:
            base += f"/{name}"
            if subresource:
                base += f"/{subresource}"
        return base


# Built-in kinds the runtime itself and typical operators use.
PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
PERSISTENTVOLUMECLAIMS = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
EVENTS = Resource("events.k8s.io", "v1", "events", "Event")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
ROLES = Resource("rbac.authorization.k8s.io", "v1", "roles", "Role")
ROLEBINDINGS = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
CLUSTERROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTERROLEBINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)

BUILTINS: tuple[Resource, ...] = (
    PODS,
    NODES,
    NAMESPACES,
    CONFIGMAPS,
    SECRETS,
    SERVICEACCOUNTS,
    PERSISTENTVOLUMECLAIMS,
    EVENTS,
    LEASES,
    DEPLOYMENTS,
    CRDS,
    ROLES,
    ROLEBINDINGS,
    CLUSTERROLES,
    CLUSTERROLEBINDINGS,
)


def name_of(obj: Object) -> str:
    return str(obj["metadata"]["name"])


def namespace_of(obj: Object) -> str | None:
    ns = obj.get("metadata", {}).get("namespace")
    return str(ns) if ns else None

"""What an HTTP request to the API server is, in Kubernetes terms (verb, resource, namespace, name).

The same reading the apiserver's ``RequestInfoFactory`` makes of a path, so fault rules
can say "watches of pods in namespace a" or "status updates of nodepools" instead of
regular expressions over URLs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

#: Kubernetes verbs that change state.
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})

#: Subresources of a Namespace that are not namespaced resources in their own right.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})

_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """One request as the apiserver classifies it.

    ``resource`` is None for non-resource paths (``/version``, ``/apis``, ``/healthz``);
    their ``verb`` is the lower-cased HTTP method. ``group`` is ``""`` for the core group.
    """

    verb: str
    resource: str | None = None
    group: str = ""
    version: str = ""
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None

    @property
    def watch(self) -> bool:
        return self.verb == "watch"

    @property
    def write(self) -> bool:
        return self.verb in WRITE_VERBS


def _truthy(value: str | None) -> bool:
    # the apiserver accepts watch=true and watch=1 (strconv.ParseBool)
    return value is not None and value.lower() in {"1", "t", "true"}


def request_info(method: str, path: str, query: Mapping[str, str]) -> RequestInfo:
    """Classify ``method path?query`` like the apiserver does."""
    method = method.upper()
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return RequestInfo(verb=method.lower())
    if not rest:  # discovery of one group-version
        return RequestInfo(verb=method.lower(), group=group, version=version)
    legacy_watch = rest[0] == "watch"
    if legacy_watch:  # /api/v1/watch/namespaces/x/pods (deprecated, still served)
        rest = rest[1:]
        if not rest:
            return RequestInfo(verb=method.lower(), group=group, version=version)
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
        # else: the namespace object itself (or its status/finalize): resource namespaces
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    subresource = "/".join(rest[2:]) or None
    if resource == "namespaces":
        namespace = None  # a Namespace is cluster-scoped (the apiserver fills in its name)
    if legacy_watch or (method == "GET" and _truthy(query.get("watch"))):
        verb = "watch"
    elif method == "GET":
        verb = "get" if name else "list"
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return RequestInfo(
        verb=verb,
        resource=resource,
        group=group,
        version=version,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )

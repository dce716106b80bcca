"""A fixed set of objects served to a real :class:`~kubeloop.Client`, and every write
recorded instead of sent: the ground a reconcile runs on in :func:`reconcile_once`.

It sits at the client's transport, the one seam below everything a reconciler calls:
``client.get``/``list``, the manager's cache (its informers LIST the snapshot and then
watch a stream that never says anything) and the helpers built on them
(``update_status``, ``apply_child``, the event recorder) all run their own code, only
the HTTP answers come from here.

What it is not: an apiserver. Reads answer from the objects given, never from a write;
a write is recorded with its body and answered with just enough for the caller to go
on (see :class:`Snapshot`), and nothing checks it as the apiserver would (no admission,
validation, defaulting, field ownership, resourceVersion conflicts or generation
bumps). A test of those needs the real control plane.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import weakref
from collections.abc import AsyncIterator, Collection, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

import msgspec

from kubeloop._client import Client
from kubeloop._config import ClusterConfig
from kubeloop._labelselector import parse as parse_selector
from kubeloop._resource import BUILTINS, PODS, Object, Resource
from kubeloop._transport import Headers, Params, Response

#: Kinds a snapshot knows without being told (others: ``Snapshot(resources=...)``).
_BUILTIN = (
    *BUILTINS,
    Resource("apps", "v1", "daemonsets", "DaemonSet"),
    Resource("apps", "v1", "replicasets", "ReplicaSet"),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
)
_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder()


@dataclass(frozen=True, slots=True)
class Write:
    """One write a reconcile sent, as sent; never applied.

    ``verb`` is ``create``, ``update``, ``patch``, ``apply`` (a server-side apply
    patch), ``delete`` or ``evict`` (a policy/v1 Eviction); ``subresource`` is e.g.
    ``"status"``; ``body`` the decoded request body (None for a bare DELETE);
    ``patch_type`` the Content-Type of a patch; ``field_manager`` the manager named.
    """

    verb: str
    resource: Resource
    namespace: str | None
    name: str
    subresource: str | None = None
    body: Any = None
    patch_type: str | None = None
    field_manager: str | None = None

    @property
    def kind(self) -> str:
        return self.resource.kind

    def __str__(self) -> str:
        sub = f"/{self.subresource}" if self.subresource else ""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.verb} {self.resource.kind}{sub} {where}"


class _Silent:
    """A watch the server keeps open and never writes to: a snapshot does not change."""

    def __init__(self) -> None:
        self.status = 200
        self.headers: Headers = {}

    async def read(self) -> bytes:
        return b""

    async def lines(self) -> AsyncIterator[bytes]:
        await asyncio.Event().wait()  # until the informer is stopped (cancelled)
        yield b""  # pragma: no cover - never reached


@dataclass
class Snapshot:
    """Objects a reconcile reads, and the writes it made; :attr:`client` serves them.

    Build the manager on :attr:`client` (``build(snapshot.client, ...)``) and run one
    reconcile with :func:`~kubeloop.testing.reconcile_once`. Each object needs
    ``apiVersion``, ``kind`` and ``metadata.name`` (and ``namespace`` if its kind is
    namespaced); kinds other than the common built-in ones are named in
    ``resources``. Missing ``resourceVersion`` and ``uid`` are filled in (``"1"``,
    ``uid-<name>``) so the runtime's bookkeeping has something to key on.

    Reads (GET, LIST with label and simple field selectors, metadata-only reads, the
    ``scale`` subresource as an ``autoscaling/v1`` Scale read at :attr:`scale_paths`)
    answer from the objects, which never change. Writes are appended to
    :attr:`writes` and answered, without being applied, with what the caller needs to
    go on:

    - create: the body sent; 409 AlreadyExists if the snapshot holds the name;
    - update (``/status`` too): the body sent; 404 if the snapshot lacks the object;
    - merge patch and server-side apply: the snapshot's object with the body merged
      over it (RFC 7386; no field ownership), or the body for an apply that creates;
      other patch types: the snapshot's object unchanged; 404 if absent (apply excepted);
    - delete: a Success Status; 404 if absent; an eviction: a Success Status, or a 429
      for a pod named in ``refuse_evictions`` (what the apiserver answers while a
      PodDisruptionBudget does not allow it; the test says which pods, no budget is
      computed here).

    Answers keep the snapshot's ``resourceVersion``, so a read after a write returns
    the snapshot's object again, not the write: the test asserts on :attr:`writes`.
    """

    objects: Iterable[Object]
    resources: Iterable[Resource] = ()
    field_manager: str = "kubeloop"
    #: where a kind's ``scale`` subresource reads its replicas (a dotted path, as a CRD's
    #: ``specReplicasPath`` without the leading dot); ``spec.replicas`` for kinds not named
    scale_paths: Mapping[Resource, str] = field(default_factory=dict)
    #: every write, in the order sent
    writes: list[Write] = field(default_factory=list, init=False)
    #: a real client whose transport is this snapshot: build the manager on it
    client: Client = field(init=False, repr=False)
    #: pods (``namespace/name``) whose eviction is refused with 429, as a
    #: PodDisruptionBudget refuses it; the refused eviction is still in :attr:`writes`
    refuse_evictions: Collection[str] = ()

    def __post_init__(self) -> None:
        kinds = [*_BUILTIN, *self.resources]
        self._by_kind = {(r.api_version, r.kind): r for r in kinds}
        self._by_path = {(r.group, r.version, r.plural): r for r in kinds}
        self._store: dict[tuple[Resource, str | None, str], bytes] = {}
        for obj in self.objects:
            res, ns, name = self._place(obj)
            body = copy.deepcopy(obj)
            meta = body["metadata"]
            meta.setdefault("resourceVersion", "1")
            meta.setdefault("uid", f"uid-{name}")
            self._store[(res, ns, name)] = _encoder.encode(body)
        versions = [int(v) for v in map(self._rv, self._store.values()) if v.isdigit()]
        self._list_rv = str(max(versions, default=1))
        self.client = Client(
            ClusterConfig(server="https://snapshot.invalid"),
            transport=self,
            field_manager=self.field_manager,
        )
        _OF_CLIENT[self.client] = self

    @staticmethod
    def _rv(raw: bytes) -> str:
        return str(_decoder.decode(raw)["metadata"]["resourceVersion"])

    def _place(self, obj: Object) -> tuple[Resource, str | None, str]:
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        res = self._by_kind.get((str(api_version), str(kind)))
        meta = obj.get("metadata") or {}
        name, ns = meta.get("name"), meta.get("namespace")
        if res is None:
            raise ValueError(
                f"snapshot object {kind} {name!r} ({api_version}): unknown kind; name its "
                "Resource in Snapshot(resources=...)"
            )
        if not name:
            raise ValueError(f"snapshot object {kind}: metadata.name is required")
        if res.namespaced and not ns:
            raise ValueError(f"snapshot object {kind} {name!r}: metadata.namespace is required")
        return res, ns if res.namespaced else None, str(name)

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> Object | None:
        """The snapshot's object (a copy), or None."""
        raw = self._store.get((resource, namespace if resource.namespaced else None, name))
        return None if raw is None else dict(_decoder.decode(raw))

    # -- the Transport protocol ------------------------------------------------------

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        body: bytes | None = None,
        headers: Headers | None = None,
        timeout: float | None = None,
    ) -> Response:
        params = params or {}
        route = self._route(path)
        if route is None:
            return _status(404, "NotFound", f"the snapshot serves no {path}")
        res, ns, name, sub = route
        if method == "GET":
            meta = "PartialObjectMetadata" in (headers or {}).get("Accept", "")
            if name is None:
                return self._list(res, ns, params, meta)
            obj = self.get(res, name, ns)
            if obj is None:
                return _not_found(res, name)
            if sub == "scale":
                return _ok(_scale(obj, self.scale_paths.get(res, "spec.replicas")))
            return _ok(_metadata_only(obj) if meta else obj)
        sent = _decoder.decode(body) if body else None
        return self._write(method, res, ns, name, sub, sent, params, headers or {})

    def stream(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        headers: Headers | None = None,
        read_timeout: float | None = None,
    ) -> AbstractAsyncContextManager[_Silent]:
        return contextlib.nullcontext(_Silent())

    async def close(self) -> None:
        return None

    # -- answers -------------------------------------------------------------------------

    def _route(self, path: str) -> tuple[Resource, str | None, str | None, str | None] | None:
        parts = [unquote(p) for p in path.strip("/").split("/")]
        if parts[:1] == ["api"] and len(parts) >= 3:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 4:
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            ns, rest = rest[1], rest[2:]
        res = self._by_path.get((group, version, rest[0]))
        if res is None:
            return None
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return res, ns, name, sub

    def _list(self, res: Resource, ns: str | None, params: Params, meta: bool) -> Response:
        labels = parse_selector(params["labelSelector"]) if params.get("labelSelector") else None
        fields = _field_terms(params.get("fieldSelector", ""))
        items = []
        for (r, o_ns, _), raw in self._store.items():
            if r != res or (ns is not None and o_ns != ns):
                continue
            obj = _decoder.decode(raw)
            if labels is not None and not labels.matches(obj):
                continue
            if not all((_dig(obj, path) == want) == equal for path, want, equal in fields):
                continue
            items.append(_metadata_only(obj) if meta else obj)
        kind = "PartialObjectMetadataList" if meta else f"{res.kind}List"
        api_version = "meta.k8s.io/v1" if meta else res.api_version
        return _ok(
            {
                "apiVersion": api_version,
                "kind": kind,
                "metadata": {"resourceVersion": self._list_rv},
                "items": items,
            }
        )

    def _write(
        self,
        method: str,
        res: Resource,
        ns: str | None,
        name: str | None,
        sub: str | None,
        sent: Any,
        params: Params,
        headers: Headers,
    ) -> Response:
        verb = _VERBS.get(method, method.lower())
        content_type = headers.get("Content-Type", "")
        if method == "PATCH" and content_type == "application/apply-patch+yaml":
            verb = "apply"
        if verb == "create" and sub == "eviction":
            verb = "evict"
        if name is None and isinstance(sent, dict):  # a create names the object in its body
            name = str((sent.get("metadata") or {}).get("name") or "")
        name = name or ""
        self.writes.append(
            Write(
                verb=verb,
                resource=res,
                namespace=ns,
                name=name,
                subresource=sub,
                body=sent,
                patch_type=content_type if method == "PATCH" else None,
                field_manager=params.get("fieldManager"),
            )
        )
        current = self.get(res, name, ns) if name else None
        if verb == "create":
            if current is not None:
                return _status(409, "AlreadyExists", f'{res.key} "{name}" already exists')
            answer = copy.deepcopy(sent)
            if ns and isinstance(answer, dict):
                answer.setdefault("metadata", {}).setdefault("namespace", ns)
            return _ok(answer, 201)
        if verb == "evict":
            if self.get(PODS, name, ns) is None:
                return _not_found(PODS, name)
            if f"{ns}/{name}" in self.refuse_evictions:
                return _status(429, "TooManyRequests", _PDB_REFUSAL, cause="DisruptionBudget")
            return _status(201, "", "", status="Success")
        if current is None and verb != "apply":
            return _not_found(res, name)
        if verb == "update":
            return _ok(sent)
        if verb == "delete":
            return _status(200, "", "", status="Success")
        if verb == "apply" or content_type == "application/merge-patch+json":
            return _ok(_merge(current or {}, sent))
        return _ok(current)


#: The snapshot behind each snapshot client (reconcile_once finds it from the manager).
_OF_CLIENT: weakref.WeakKeyDictionary[Client, Snapshot] = weakref.WeakKeyDictionary()


def snapshot_of(client: Client) -> Snapshot | None:
    """The :class:`Snapshot` serving ``client``, or None for any other client."""
    return _OF_CLIENT.get(client)


def _ok(obj: Any, status: int = 200) -> Response:
    return Response(status, {"Content-Type": "application/json"}, _encoder.encode(obj))


#: The apiserver's message when a PodDisruptionBudget refuses an eviction.
_PDB_REFUSAL = "Cannot evict pod as it would violate the pod's disruption budget."


def _status(
    code: int, reason: str, message: str, *, status: str = "Failure", cause: str = ""
) -> Response:
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Status",
        "status": status,
        "reason": reason,
        "message": message,
        "code": code,
    }
    if cause:
        body["details"] = {"causes": [{"reason": cause, "message": message}]}
    return _ok(body, code)


def _not_found(res: Resource, name: str) -> Response:
    return _status(404, "NotFound", f'{res.key} "{name}" not found')


def _metadata_only(obj: Object) -> Object:
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": obj.get("metadata") or {},
    }


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, for an answer only (the snapshot is not changed)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _field_terms(selector: str) -> list[tuple[str, str, bool]]:
    """``a.b=x,c!=y`` as (path, value, equal) terms; the apiserver's field selectors
    are only ever equality tests on a few paths."""
    terms = []
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            path, value = term.split("!=", 1)
            terms.append((path, value, False))
        else:
            path, value = term.replace("==", "=").split("=", 1)
            terms.append((path, value, True))
    return terms


def _scale(obj: Object, replicas_path: str) -> Object:
    """The object's Scale, as the apiserver builds it for a scale subresource."""
    meta = obj["metadata"]
    replicas: Any = obj
    for part in replicas_path.split("."):
        replicas = replicas.get(part) if isinstance(replicas, Mapping) else None
    return {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta
        },
        "spec": {"replicas": replicas if isinstance(replicas, int) else 0},
    }


def _dig(obj: Mapping[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return "" if value is None else str(value)

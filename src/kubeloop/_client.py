"""The async API client: CRUD, patch, server-side apply, watch and discovery on plain dicts.

Objects stay the decoded JSON (:data:`~kubeloop._resource.Object`), so unknown
fields survive a read-modify-write.

Retries, as client-go's ``rest.Request`` does them:

* **Throttling, every verb.** A 429, or a 5xx carrying ``Retry-After``, means the
  server did not act on the request (API Priority and Fairness rejects before
  any work; a 503 with Retry-After comes from an apiserver shutting down), so
  any verb (reads and writes) is sent again after the pause the server asked
  for, up to 10 retries (client-go's ``maxRetries``). The pause comes from
  :func:`~kubeloop._backoff.retry_after_pause`, the runtime's one Retry-After path.
* **Connection errors, reads only.** GET/LIST/discovery are tried 3 times; a write
  whose connection broke may or may not have been applied, and only the caller
  knows whether repeating it is safe.

No client-side rate limit by default: controller-runtime turned its limiter off in
2025 (kubernetes-sigs/controller-runtime#3119, on SIG API Machinery's advice), since
the apiserver's Priority and Fairness protects it and answers overload with a 429
that is honoured above; a fixed 20 requests per second made a burst of 300 objects
take 30 s. Given ``qps``/``burst``, every request except watches (and Lease
requests, so leader election never queues behind a burst of reconciles) first takes
a token from a client-side bucket, as client-go's ``rest.Config.QPS``/``Burst``.
Watches are exempt (as in client-go): they are long-lived and rate-limiting them
would only delay a cache's recovery.
"""

from __future__ import annotations

import asyncio
import builtins
import email.utils
import enum
import gc
import importlib.metadata
import logging
import random
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol, Self, cast, overload
from urllib.parse import urlsplit

import msgspec

from kubeloop._backoff import BucketRateLimiter, retry_after_pause
from kubeloop._config import ClusterConfig, load_config, load_kubeconfig
from kubeloop._errors import ApiError, Gone, NotFound, TransportError
from kubeloop._log import CONTROLLER
from kubeloop._resource import PODS, Object, Resource, name_of, namespace_of
from kubeloop._transport import Headers, HttpTransport, Transport
from kubeloop._writers import WriterLog

_log = logging.getLogger("kubeloop.client")


def _default_user_agent() -> str:
    try:
        version = importlib.metadata.version("kubeloop")
    except importlib.metadata.PackageNotFoundError:
        version = "dev"
    return f"kubeloop/{version} (python)"


DEFAULT_USER_AGENT = _default_user_agent()

#: Attempts for an idempotent read that failed without a response.
_READ_TRIES = 3
#: Retries of a throttled request (429, or 5xx with Retry-After), any verb: client-go's maxRetries.
MAX_THROTTLE_RETRIES = 10
#: Client-side rate limit defaults: none, as controller-runtime since #3119 (the
#: apiserver's Priority and Fairness is the limit); the burst applies once ``qps`` is set.
DEFAULT_QPS: float | None = None
DEFAULT_BURST = 30
#: A wait for a client-side token longer than this is logged, as client-go does.
_THROTTLE_LOG_AFTER = 1.0
#: Never queued behind the bucket: a lease renewal stuck behind a reconcile burst would
#: lose leadership (client-go gives leader election a client, and a limiter, of its own).
_UNTHROTTLED = frozenset({("coordination.k8s.io", "leases")})
#: Bodies above this are decoded with the cyclic GC paused: decoding a big LIST
#: allocates so many containers that repeated collections (which also scan the
#: whole cache) cost several times the decode itself (research note §3.2). Low
#: enough for one LIST page of small objects (500 of ~450 B is ~230 KB): decoded
#: with the GC on, each page's objects were promoted while half-built and set off
#: full collections (7 during a 100,000-object sync; 1 with this threshold, see
#: bench/informer_scale.py).
_GC_PAUSE_BYTES = 1 << 16
#: Page size for :meth:`Client.list_all`, as client-go's pager uses.
_DEFAULT_PAGE = 500


class PatchType(enum.StrEnum):
    """A patch flavour; the value is its Content-Type."""

    #: RFC 7386 JSON merge patch: maps merge, lists are replaced, null deletes.
    MERGE = "application/merge-patch+json"
    #: RFC 6902 JSON patch: a list of operations.
    JSON = "application/json-patch+json"
    #: Strategic merge patch: lists merge by key (built-in kinds only).
    STRATEGIC = "application/strategic-merge-patch+json"
    #: Server-side apply. The body is sent as JSON, which is valid YAML.
    APPLY = "application/apply-patch+yaml"


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event: ``type`` is ADDED, MODIFIED, DELETED or BOOKMARK."""

    type: str
    object: Object


class RequestObserver(Protocol):
    """Told about every HTTP attempt (for metrics). ``code`` is 0 when no response
    arrived; ``verb`` is the Kubernetes verb (get, list, watch, create, update,
    patch, delete); ``resource`` is None for discovery and version requests."""

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None: ...


class WriteObserver(Protocol):
    """Optionally implemented by an observer: told the server's answer to every
    successful create, update or patch that returned the object itself (not a
    Scale), so a cache can read its own writes before the watch delivers them."""

    def on_write(self, resource: Resource, subresource: str | None, obj: Object) -> None: ...


class DeleteObserver(Protocol):
    """Optionally implemented by an observer: told every successful DELETE that the
    server answered with a Status (the object is gone, no version to wait for), with
    the uid it removed, so a cache read after it can wait for the watch's delete."""

    def on_delete(self, resource: Resource, namespace: str | None, name: str, uid: str) -> None: ...


class _RawEvent(msgspec.Struct):
    type: str
    object: dict[str, Any]


_decoder = msgspec.json.Decoder()
_event_decoder = msgspec.json.Decoder(_RawEvent)
_encoder = msgspec.json.Encoder()


def _decode(body: bytes) -> Any:
    if not body:
        return {}
    if len(body) < _GC_PAUSE_BYTES or not gc.isenabled():
        return _decoder.decode(body)
    gc.disable()  # no await in between, so no other task runs with GC off
    try:
        return _decoder.decode(body)
    finally:
        gc.enable()


@dataclass(frozen=True, slots=True)
class ListPage:
    """One page of a LIST (:meth:`Client.list_pages`)."""

    items: builtins.list[Object]
    #: the list's resourceVersion (the same snapshot on every page)
    resource_version: str
    #: the pages before this one are void: the list started over in one request
    restart: bool


#: ``Accept`` for a metadata-only LIST: the apiserver answers a
#: ``PartialObjectMetadataList`` of ``PartialObjectMetadata`` items (apiVersion
#: ``meta.k8s.io/v1``: metadata only, no spec, status or data). The plain JSON after the
#: comma is what a server that cannot convert would send instead (never, since 1.15).
ACCEPT_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)
#: ``Accept`` for a metadata-only GET or WATCH (each object, each event's object).
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
#: The ``kind`` and ``apiVersion`` of a metadata-only object.
PARTIAL_OBJECT_METADATA = "PartialObjectMetadata"
META_API_VERSION = "meta.k8s.io/v1"


def _page(res: Resource, page: Object, *, restart: bool) -> ListPage:
    items: builtins.list[Object] = page.get("items") or []
    partial = page.get("kind") == "PartialObjectMetadataList"
    for item in items:
        # a metadata-only list's items say what they are (PartialObjectMetadata)
        item.setdefault("apiVersion", META_API_VERSION if partial else res.api_version)
        item.setdefault("kind", PARTIAL_OBJECT_METADATA if partial else res.kind)
    meta = page.get("metadata") or {}
    return ListPage(items, str(meta.get("resourceVersion") or ""), restart)


def _retry_after(headers: Headers) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date)."""
    value = headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _api_error(status: int, body: bytes, headers: Headers) -> ApiError:
    try:
        decoded: Any = _decoder.decode(body) if body else None
    except msgspec.DecodeError:
        decoded = body.decode(errors="replace")
    return ApiError.from_status(status, decoded, retry_after=_retry_after(headers))


def _backoff(attempt: int) -> float:
    """0.1-0.2 s, then 0.2-0.4 s: enough for a connection blip, short for a caller."""
    return 0.1 * (1 << (attempt - 1)) * (1 + random.random())


def _params(**values: str | int | bool | None) -> dict[str, str]:
    """Query parameters without the unset ones, booleans spelled as Go parses them."""
    out: dict[str, str] = {}
    for key, value in values.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


def _namespace(res: Resource, namespace: str | None, obj: Object | None = None) -> str | None:
    if not res.namespaced:
        return None
    ns = namespace or (namespace_of(obj) if obj is not None else None)
    if not ns:
        raise ValueError(f"{res.key} is namespaced: a namespace is required")
    return ns


def _required_name(name: str) -> str:
    if not name:
        raise ValueError("an object name is required")
    return name


class Client:
    """An async Kubernetes API client. Use as ``async with Client(config) as client``.

    ``field_manager`` names this client in ``managedFields`` for every write; inside a
    reconcile it becomes ``<field_manager>-<controller>``, so each controller's fields
    have their own owner without any wiring;
    ``observer`` (and any added with :meth:`add_observer`) receives one call per
    HTTP attempt, and each write's result if it also is a :class:`WriteObserver`.

    ``qps`` and ``burst`` optionally bound the requests this client sends (watches
    and Leases excepted): a token bucket of ``burst`` tokens refilled at ``qps`` per
    second. The default is no client-side limit (``qps=None``), as controller-runtime's:
    the apiserver's Priority and Fairness protects it, and its 429s are retried after
    their ``Retry-After``. :attr:`limiter_waits` counts the requests that waited for a
    token.
    """

    def __init__(
        self,
        config: ClusterConfig,
        *,
        transport: Transport | None = None,
        field_manager: str = "kubeloop",
        user_agent: str = DEFAULT_USER_AGENT,
        observer: RequestObserver | None = None,
        qps: float | None = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> None:
        self.config = config
        self._bucket = BucketRateLimiter(qps, burst) if qps is not None and qps > 0 else None
        #: Requests that waited for a client-side token (0 while there is no limit).
        self.limiter_waits = 0
        self.field_manager = field_manager
        self._transport: Transport = transport or HttpTransport(config)
        self._owns_transport = transport is None
        self._observers: builtins.list[RequestObserver] = []
        self._write_observers: builtins.list[WriteObserver] = []
        self._delete_observers: builtins.list[DeleteObserver] = []
        if observer is not None:
            self.add_observer(observer)
        self._headers: dict[str, str] = {"Accept": "application/json", "User-Agent": user_agent}
        self._header_sets: dict[tuple[str | None, str | None], Headers] = {}
        #: who last wrote each object this client has seen (to name the other side of a 409)
        self.writers = WriterLog()
        self._discovery: dict[str, dict[str, Resource]] = {}

    @classmethod
    def from_kubeconfig(
        cls,
        path: str | Path | None = None,
        context: str | None = None,
        *,
        field_manager: str = "kubeloop",
        observer: RequestObserver | None = None,
        qps: float | None = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> Client:
        """A client for a kubeconfig context (reads the file synchronously: start-up only)."""
        return cls(
            load_kubeconfig(path, context),
            field_manager=field_manager,
            observer=observer,
            qps=qps,
            burst=burst,
        )

    @classmethod
    def from_env(
        cls,
        *,
        field_manager: str = "kubeloop",
        observer: RequestObserver | None = None,
        qps: float | None = DEFAULT_QPS,
        burst: int = DEFAULT_BURST,
    ) -> Client:
        """A client for wherever this process runs: ``$KUBECONFIG`` (all its files,
        merged), else the pod's service account, else ``~/.kube/config``
        (:func:`~kubeloop.load_config`'s order, which is controller-runtime's)."""
        return cls(
            load_config(), field_manager=field_manager, observer=observer, qps=qps, burst=burst
        )

    @property
    def host(self) -> str:
        """``host:port`` of the API server (the ``host`` label of request metrics)."""
        return urlsplit(self.config.server).netloc

    def add_observer(self, observer: RequestObserver) -> None:
        """Also report requests (and, for a :class:`WriteObserver`, writes) to ``observer``."""
        self._observers.append(observer)
        if callable(getattr(observer, "on_write", None)):
            self._write_observers.append(cast(WriteObserver, observer))
        if callable(getattr(observer, "on_delete", None)):
            self._delete_observers.append(cast(DeleteObserver, observer))

    async def close(self) -> None:
        """Close connections (only those of a transport this client created)."""
        if self._owns_transport:
            await self._transport.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- the one request path ------------------------------------------------------

    def _observe(
        self, verb: str, res: Resource | None, sub: str | None, code: int, start: float
    ) -> None:
        if not self._observers:
            return
        seconds = time.monotonic() - start
        for observer in self._observers:
            try:
                observer.on_request(verb, res, sub, code, seconds)
            except Exception:  # a metrics bug must not fail API calls
                _log.exception("request observer failed")

    def _wrote(self, res: Resource, sub: str | None, result: Any) -> Object:
        obj = cast(Object, result)
        if obj.get("kind") == res.kind:
            self.writers.refresh(obj)  # the base of our next write to it
        if self._write_observers and obj.get("kind") == res.kind:
            for observer in self._write_observers:
                try:
                    observer.on_write(res, sub, obj)
                except Exception:  # the write itself succeeded; don't turn it into an error
                    _log.exception("write observer failed")
        return obj

    async def _call(
        self,
        verb: str,
        res: Resource | None,
        sub: str | None,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        accept: str | None = None,
    ) -> Any:
        payload = None if body is None else _encoder.encode(body)
        headers = self._headers_for(None if payload is None else content_type, accept)
        idempotent = method == "GET"
        failures = throttled = 0
        throttle = res is None or (res.group, res.plural) not in _UNTHROTTLED
        while True:
            if throttle:
                await self._throttle(verb, path)
            start = time.monotonic()
            try:
                resp = await self._transport.request(
                    method, path, params=params, body=payload, headers=headers
                )
            except TransportError:
                self._observe(verb, res, sub, 0, start)
                failures += 1
                if not idempotent or failures >= _READ_TRIES:
                    raise
                await asyncio.sleep(_backoff(failures))
                continue
            self._observe(verb, res, sub, resp.status, start)
            if resp.status < 400:
                return _decode(resp.body)
            err = _api_error(resp.status, resp.body, resp.headers)
            retryable = resp.status == 429 or resp.status >= 500
            if not retryable or err.retry_after is None or throttled >= MAX_THROTTLE_RETRIES:
                raise err
            # the server did not act on it: wait as told, then send it again (any verb)
            throttled += 1
            pause = retry_after_pause(err.retry_after)
            _log.info(
                "%s %s throttled (%d); retry %d in %.1fs",
                method,
                path,
                resp.status,
                throttled,
                pause,
            )
            await asyncio.sleep(pause)

    def _headers_for(self, content_type: str | None, accept: str | None) -> Headers:
        """The request headers for a body of ``content_type`` (None: no body) and an
        ``Accept`` (None: JSON), built once per combination (a handful), not per request."""
        key = (content_type, accept)
        headers = self._header_sets.get(key)
        if headers is None:
            headers = dict(self._headers)
            if content_type is not None:
                headers["Content-Type"] = content_type
            if accept is not None:
                headers["Accept"] = accept
            self._header_sets[key] = headers
        return headers

    async def _throttle(self, verb: str, path: str) -> None:
        """Wait for a client-side token (the bucket hands out reservations, so
        concurrent callers queue in order rather than all waking at once)."""
        if self._bucket is None:
            return
        wait = self._bucket.when(None)
        if wait <= 0:
            return
        self.limiter_waits += 1
        if wait > _THROTTLE_LOG_AFTER:
            _log.info("waited %.1fs for client-side throttling before %s %s", wait, verb, path)
        try:
            await asyncio.sleep(wait)
        except asyncio.CancelledError:
            self._bucket.cancel()  # never sent: its token goes to the callers behind it
            raise

    # -- reads -----------------------------------------------------------------------

    async def get(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        metadata_only: bool = False,
    ) -> Object:
        """GET one object (or one of its subresources) straight from the server.

        ``metadata_only``: a ``PartialObjectMetadata`` (metadata, no spec/status/data)."""
        path = res.path(_namespace(res, namespace), _required_name(name), subresource)
        accept = ACCEPT_METADATA if metadata_only else None
        return cast(Object, await self._call("get", res, subresource, "GET", path, accept=accept))

    async def list(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        metadata_only: bool = False,
    ) -> Object:
        """One LIST request; returns the List object itself, whose ``metadata`` has the
        ``resourceVersion`` to watch from and the ``continue`` token of the next page.
        ``namespace=None`` lists across all namespaces. ``metadata_only``: a
        ``PartialObjectMetadataList`` (each item's metadata only)."""
        params = _params(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=limit,
            resourceVersion=resource_version,
            resourceVersionMatch=resource_version_match,
        )
        if continue_:
            params["continue"] = continue_
        path = res.path(namespace if res.namespaced else None)
        accept = ACCEPT_METADATA_LIST if metadata_only else None
        return cast(
            Object, await self._call("list", res, None, "GET", path, params=params, accept=accept)
        )

    async def list_all(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = _DEFAULT_PAGE,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> tuple[builtins.list[Object], str]:
        """Every object, page by page (:meth:`list_pages`), and the list's resourceVersion."""
        items: builtins.list[Object] = []
        rv = ""
        async for page in self.list_pages(
            res,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            limit=limit,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
        ):
            if page.restart:
                items = []
            items.extend(page.items)
            rv = page.resource_version
        return items, rv

    async def list_pages(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int = _DEFAULT_PAGE,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        metadata_only: bool = False,
    ) -> AsyncGenerator[ListPage, None]:
        """The objects one page at a time, so a large list need not be held whole (an
        informer stores each page as it comes).

        Items get ``apiVersion``/``kind`` filled in (the server omits them for
        built-in kinds), so they look like watched objects. If a continue token
        expires mid-way (410 on a page after the first), the list is made once more
        in one unpaged request, which has no token to expire (client-go's pager
        ``FullListIfExpired``); that page comes with ``restart`` set: drop the pages
        before it. ``metadata_only``: ``PartialObjectMetadata`` items (see :meth:`list`).
        """
        token: str | None = None
        try:
            while True:
                first = token is None
                page = await self.list(
                    res,
                    namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    limit=limit,
                    continue_=token,
                    # the continue token pins the snapshot; the server rejects both
                    resource_version=resource_version if first else None,
                    resource_version_match=resource_version_match if first else None,
                    metadata_only=metadata_only,
                )
                meta = page.get("metadata") or {}
                token = meta.get("continue") or None
                yield _page(res, page, restart=False)
                if token is None:
                    return
        except Gone:
            if token is None:
                raise  # the first page itself: the caller's resourceVersion is too old
            _log.info("continue token for %s expired; listing in one request", res.key)
        page = await self.list(
            res,
            namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
            metadata_only=metadata_only,
        )
        yield _page(res, page, restart=True)

    # -- writes ----------------------------------------------------------------------

    async def create(
        self,
        res: Resource,
        obj: Object,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Object:
        """POST ``obj``; the namespace comes from the argument or ``obj``'s metadata.

        With ``subresource``, POST to that subresource of the object named by ``obj``'s
        metadata, e.g. a policy/v1 Eviction to a pod's ``eviction``."""
        ns = _namespace(res, namespace, obj)
        path = res.path(ns, name_of(obj), subresource) if subresource else res.path(ns)
        params = {"fieldManager": self.manager_name()}
        result = await self._call("create", res, subresource, "POST", path, params=params, body=obj)
        return self._wrote(res, subresource, result)

    async def update(self, res: Resource, obj: Object, *, subresource: str | None = None) -> Object:
        """PUT ``obj`` (name and namespace from its metadata). A stale
        ``metadata.resourceVersion`` fails with :class:`~kubeloop._errors.Conflict`."""
        path = res.path(_namespace(res, None, obj), name_of(obj), subresource)
        params = {"fieldManager": self.manager_name()}
        result = await self._call("update", res, subresource, "PUT", path, params=params, body=obj)
        return self._wrote(res, subresource, result)

    def manager_name(self) -> str:
        """The field manager for a write made now (see the class docstring)."""
        controller = CONTROLLER.get()
        return f"{self.field_manager}-{controller}" if controller else self.field_manager

    async def update_status(self, res: Resource, obj: Object) -> Object:
        """PUT the ``status`` subresource: only ``obj["status"]`` is written."""
        return await self.update(res, obj, subresource="status")

    async def patch(
        self,
        res: Resource,
        name: str,
        body: Object | builtins.list[Any],
        namespace: str | None = None,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> Object:
        """PATCH ``name`` with ``body`` (a list for :attr:`PatchType.JSON`).
        ``force`` is only meaningful for :attr:`PatchType.APPLY`."""
        params = _params(fieldManager=field_manager or self.manager_name())
        if force is not None:
            if patch_type is not PatchType.APPLY:
                raise ValueError("force applies only to server-side apply (PatchType.APPLY)")
            params["force"] = "true" if force else "false"
        path = res.path(_namespace(res, namespace), _required_name(name), subresource)
        result = await self._call(
            "patch",
            res,
            subresource,
            "PATCH",
            path,
            params=params,
            body=body,
            content_type=patch_type.value,
        )
        return self._wrote(res, subresource, result)

    async def apply(
        self,
        res: Resource,
        obj: Object,
        *,
        field_manager: str | None = None,
        force: bool = False,
        subresource: str | None = None,
    ) -> Object:
        """Server-side apply ``obj`` (a partial object with the fields this manager
        owns). Without ``force``, fields owned by another manager with a different
        value fail with :class:`~kubeloop._errors.Conflict`."""
        if "apiVersion" not in obj or "kind" not in obj:
            obj = {"apiVersion": res.api_version, "kind": res.kind, **obj}
        return await self.patch(
            res,
            name_of(obj),
            obj,
            namespace_of(obj),
            patch_type=PatchType.APPLY,
            subresource=subresource,
            field_manager=field_manager,
            force=force,
        )

    @overload
    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        preconditions: Mapping[str, str] | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        ignore_not_found: Literal[False] = False,
    ) -> Object: ...

    @overload
    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        preconditions: Mapping[str, str] | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        ignore_not_found: bool,
    ) -> Object | None: ...

    async def delete(
        self,
        res: Resource,
        name: str,
        namespace: str | None = None,
        *,
        preconditions: Mapping[str, str] | None = None,
        propagation_policy: str | None = None,
        grace_period_seconds: int | None = None,
        ignore_not_found: bool = False,
    ) -> Object | None:
        """DELETE ``name``. ``preconditions`` (``uid``/``resourceVersion``) make the
        delete fail with :class:`~kubeloop._errors.Conflict` if the object changed.
        ``propagation_policy`` is Orphan, Background or Foreground. Returns the
        object (when deletion is deferred by finalizers) or a Status.

        ``ignore_not_found=True`` returns None instead of raising
        :class:`~kubeloop._errors.NotFound` when the object is already gone (someone else,
        or the garbage collector, deleted it first): the "delete this child" step of a
        reconcile or a finalizer wants it absent, not to have been the one to delete it
        (controller-runtime's ``client.IgnoreNotFound``)."""
        if ignore_not_found:
            try:
                return await self.delete(
                    res,
                    name,
                    namespace,
                    preconditions=preconditions,
                    propagation_policy=propagation_policy,
                    grace_period_seconds=grace_period_seconds,
                )
            except NotFound:
                return None
        options: dict[str, Any] = {}
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        body = {"apiVersion": "v1", "kind": "DeleteOptions", **options} if options else None
        ns = _namespace(res, namespace)
        path = res.path(ns, _required_name(name))
        result = cast(Object, await self._call("delete", res, None, "DELETE", path, body=body))
        if result.get("kind") == res.kind:
            # deferred by finalizers (or a grace period): a write like any other
            return self._wrote(res, None, result)
        uid = str((result.get("details") or {}).get("uid") or "")
        for observer in self._delete_observers:
            try:
                observer.on_delete(res, ns, name, uid)
            except Exception:  # the delete itself succeeded; don't turn it into an error
                _log.exception("delete observer failed")
        return result

    async def evict(
        self,
        name: str,
        namespace: str,
        *,
        grace_period_seconds: int | None = None,
        preconditions: Mapping[str, str] | None = None,
    ) -> Object:
        """Evict pod ``name`` through the Eviction API (a policy/v1 ``Eviction`` POSTed to
        ``pods/eviction``): a delete that the server refuses with
        :class:`~kubeloop._errors.TooManyRequests` (429) while a PodDisruptionBudget does not
        allow it. That refusal means "not now", so it is never retried here: the caller
        decides when to ask again. ``grace_period_seconds=None`` keeps the pod's own
        ``terminationGracePeriodSeconds``."""
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": _required_name(name), "namespace": namespace},
        }
        options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = dict(preconditions)
        if options:
            body["deleteOptions"] = options
        # The one POST-to-a-subresource path, so an eviction is logged and measured as one.
        return await self.create(PODS, body, namespace, subresource="eviction")

    # -- scale -------------------------------------------------------------------------

    async def get_scale(self, res: Resource, name: str, namespace: str | None = None) -> Object:
        """The ``autoscaling/v1`` Scale of ``name``."""
        return await self.get(res, name, namespace, subresource="scale")

    async def update_scale(self, res: Resource, scale: Object) -> Object:
        """PUT a Scale (as returned by :meth:`get_scale`, with a new ``spec.replicas``)."""
        return await self.update(res, scale, subresource="scale")

    async def patch_scale(
        self,
        res: Resource,
        name: str,
        body: Object,
        namespace: str | None = None,
        *,
        patch_type: PatchType = PatchType.MERGE,
    ) -> Object:
        """Patch the Scale, e.g. ``{"spec": {"replicas": 3}}``."""
        return await self.patch(
            res, name, body, namespace, patch_type=patch_type, subresource="scale"
        )

    # -- watch -----------------------------------------------------------------------

    async def watch(
        self,
        res: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None,
        allow_bookmarks: bool = True,
        timeout_seconds: int | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        read_timeout: float | None = None,
        metadata_only: bool = False,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Events after ``resource_version`` until the server ends the watch.

        An ERROR event or an HTTP error raises the matching
        :class:`~kubeloop._errors.ApiError` (:class:`~kubeloop._errors.Gone` when
        the version is too old: re-list). No data for ``read_timeout`` seconds
        raises :class:`~kubeloop._errors.RequestTimeout`: the connection has
        stalled. Close the iterator (``contextlib.aclosing``) when stopping early.
        ``metadata_only``: each event's object is a ``PartialObjectMetadata``.
        """
        params = _params(
            watch=True,
            resourceVersion=resource_version,
            allowWatchBookmarks=True if allow_bookmarks else None,
            timeoutSeconds=timeout_seconds,
            labelSelector=label_selector,
            fieldSelector=field_selector,
        )
        path = res.path(namespace if res.namespaced else None)
        headers = {**self._headers, "Accept": ACCEPT_METADATA} if metadata_only else self._headers
        start = time.monotonic()
        answered = False
        try:
            async with self._transport.stream(
                "GET", path, params=params, headers=headers, read_timeout=read_timeout
            ) as resp:
                answered = True
                self._observe("watch", res, None, resp.status, start)
                if resp.status >= 400:
                    raise _api_error(resp.status, await resp.read(), resp.headers)
                async for line in resp.lines():
                    try:
                        event = _event_decoder.decode(line)
                    except msgspec.DecodeError as err:
                        raise TransportError(f"malformed watch event on {path}: {err}") from err
                    if event.type == "ERROR":
                        status = event.object
                        raise ApiError.from_status(int(status.get("code") or 500), status)
                    yield WatchEvent(event.type, event.object)
        except TransportError:
            if not answered:
                self._observe("watch", res, None, 0, start)
            raise

    # -- discovery -------------------------------------------------------------------

    async def discover(self, api_version: str, kind: str) -> Resource:
        """The resource serving ``kind`` in ``api_version`` (``"v1"``, ``"apps/v1"``,
        CRDs included). Cached per group-version; a miss refreshes the cache once,
        since a CRD may have been installed since. Raises
        :class:`~kubeloop._errors.NotFound` if the server does not serve it."""
        table = self._discovery.get(api_version)
        if table is None or kind not in table:
            table = await self._resources_of(api_version)
        res = table.get(kind)
        if res is None:
            raise NotFound(404, "NotFound", f"{api_version} has no resource of kind {kind}")
        return res

    async def _resources_of(self, api_version: str) -> dict[str, Resource]:
        group, _, version = api_version.rpartition("/")
        path = f"/apis/{api_version}" if group else f"/api/{version}"
        body = await self._call("get", None, None, "GET", path)
        table: dict[str, Resource] = {}
        for entry in body.get("resources") or ():
            plural = entry.get("name", "")
            if not plural or "/" in plural:  # subresources: pods/status, ...
                continue
            table.setdefault(
                entry["kind"],
                Resource(group, version, plural, entry["kind"], bool(entry.get("namespaced"))),
            )
        self._discovery[api_version] = table
        return table

    async def server_version(self) -> dict[str, Any]:
        """``/version``: ``gitVersion``, ``major``, ``minor``, ..."""
        return cast(dict[str, Any], await self._call("get", None, None, "GET", "/version"))

"""kubeloop: a controller-runtime-grade asyncio runtime for Kubernetes operators.

The public API is what this module exports; everything in ``kubeloop._*`` is
private and may change. A minimal operator::

    from kubeloop import Client, Manager, Request, Result, generation_changed

    async def reconcile(req: Request) -> Result:
        obj = await mgr.cache.get(WIDGETS, req.name, req.namespace)
        ...
        return Result()

    mgr = Manager(Client.from_kubeconfig())
    mgr.controller("widgets").for_(WIDGETS, predicates=[generation_changed]).complete(reconcile)
    await mgr.run()
"""

from kubeloop._backoff import (
    DEFAULT_BACKOFF,
    DEFAULT_RETRY,
    Backoff,
    BucketRateLimiter,
    ItemExponentialBackoff,
    MaxOf,
    RateLimiter,
    default_controller_rate_limiter,
)
from kubeloop._builder import Builder
from kubeloop._client import Client, PatchType, RequestObserver, WatchEvent, WriteObserver
from kubeloop._conditions import (
    condition,
    get_condition,
    is_false,
    is_true,
    needs_reconcile,
    observed_generation_current,
    remove_condition,
    set_condition,
)
from kubeloop._config import ClusterConfig, load_config, load_incluster, load_kubeconfig
from kubeloop._controller import Controller, ControllerOptions
from kubeloop._errors import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Cause,
    ConfigError,
    Conflict,
    ErrorClass,
    Forbidden,
    Gone,
    Invalid,
    KubeloopError,
    MethodNotAllowed,
    NotFound,
    RequestTimeout,
    ServerError,
    ServerTimeout,
    TerminalError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    classify,
)
from kubeloop._event import Added, Deleted, Event, Generic, Updated
from kubeloop._fence import NotLeader
from kubeloop._handler import (
    EventHandler,
    MapFunc,
    enqueue_mapped,
    enqueue_object,
    enqueue_owner,
    request_for,
)
from kubeloop._informer import Cache, Informer, OutOfScope
from kubeloop._leader import LeaderElectionOptions, LeaderElector
from kubeloop._log import configure_logging
from kubeloop._loopdetect import LoopDetectionOptions
from kubeloop._manager import LeaderElectionLost, Manager, ManagerOptions
from kubeloop._metrics import REGISTRY, Registry, RuntimeMetrics
from kubeloop._objects import (
    AlreadyOwnedError,
    OperationResult,
    add_finalizer,
    apply_child,
    controller_of,
    create_or_patch,
    create_or_update,
    finalizer_add_patch,
    finalizer_remove_patch,
    has_finalizer,
    merge_patch,
    owner_reference,
    remove_finalizer,
    set_controller_reference,
    set_owner_reference,
)
from kubeloop._predicate import (
    Predicate,
    all_of,
    annotations_changed,
    any_of,
    changed_paths,
    field_changed,
    generation_changed,
    label_selector,
    labels_changed,
    not_,
    object_filter,
    resource_version_changed,
)
from kubeloop._reconcile import Reconciler, Request, Result
from kubeloop._recorder import EventRecorder
from kubeloop._reflector import ReflectorOptions, strip_managed_fields
from kubeloop._resource import (
    CONFIGMAPS,
    CRDS,
    DEPLOYMENTS,
    EVENTS,
    LEASES,
    NAMESPACES,
    NODES,
    PERSISTENTVOLUMECLAIMS,
    PODS,
    SECRETS,
    Object,
    Resource,
)
from kubeloop._retry import retry_on_conflict, retry_transient
from kubeloop._source import ChannelSource, KindSource, PeriodicSource, Source
from kubeloop._status import StaleGeneration, retry_update, set_status_condition, update_status
from kubeloop._store import Store, copy_object, object_key
from kubeloop._workqueue import QueueShutDown, WorkQueue

__version__ = "0.1.0"

__all__ = [
    "CONFIGMAPS",
    "CRDS",
    "DEFAULT_BACKOFF",
    "DEFAULT_RETRY",
    "DEPLOYMENTS",
    "EVENTS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PERSISTENTVOLUMECLAIMS",
    "PODS",
    "REGISTRY",
    "SECRETS",
    "Added",
    "AlreadyExists",
    "AlreadyOwnedError",
    "ApiError",
    "Backoff",
    "BadRequest",
    "BucketRateLimiter",
    "Builder",
    "Cache",
    "Cause",
    "ChannelSource",
    "Client",
    "ClusterConfig",
    "ConfigError",
    "Conflict",
    "Controller",
    "ControllerOptions",
    "Deleted",
    "ErrorClass",
    "Event",
    "EventHandler",
    "EventRecorder",
    "Forbidden",
    "Generic",
    "Gone",
    "Informer",
    "Invalid",
    "ItemExponentialBackoff",
    "KindSource",
    "KubeloopError",
    "LeaderElectionLost",
    "LeaderElectionOptions",
    "LeaderElector",
    "LoopDetectionOptions",
    "Manager",
    "ManagerOptions",
    "MapFunc",
    "MaxOf",
    "MethodNotAllowed",
    "NotFound",
    "NotLeader",
    "Object",
    "OperationResult",
    "OutOfScope",
    "PatchType",
    "PeriodicSource",
    "Predicate",
    "QueueShutDown",
    "RateLimiter",
    "Reconciler",
    "ReflectorOptions",
    "Registry",
    "Request",
    "RequestObserver",
    "RequestTimeout",
    "Resource",
    "Result",
    "RuntimeMetrics",
    "ServerError",
    "ServerTimeout",
    "Source",
    "StaleGeneration",
    "Store",
    "TerminalError",
    "TooManyRequests",
    "TransportError",
    "Unauthorized",
    "Updated",
    "WatchEvent",
    "WorkQueue",
    "WriteObserver",
    "add_finalizer",
    "all_of",
    "annotations_changed",
    "any_of",
    "apply_child",
    "changed_paths",
    "classify",
    "condition",
    "configure_logging",
    "controller_of",
    "copy_object",
    "create_or_patch",
    "create_or_update",
    "default_controller_rate_limiter",
    "enqueue_mapped",
    "enqueue_object",
    "enqueue_owner",
    "field_changed",
    "finalizer_add_patch",
    "finalizer_remove_patch",
    "generation_changed",
    "get_condition",
    "has_finalizer",
    "is_false",
    "is_true",
    "label_selector",
    "labels_changed",
    "load_config",
    "load_incluster",
    "load_kubeconfig",
    "merge_patch",
    "needs_reconcile",
    "not_",
    "object_filter",
    "object_key",
    "observed_generation_current",
    "owner_reference",
    "remove_condition",
    "remove_finalizer",
    "request_for",
    "resource_version_changed",
    "retry_on_conflict",
    "retry_transient",
    "retry_update",
    "set_condition",
    "set_controller_reference",
    "set_owner_reference",
    "set_status_condition",
    "strip_managed_fields",
    "update_status",
]

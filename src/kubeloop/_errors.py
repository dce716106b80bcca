"""kubeloop's exception tree, and the one place that classifies API errors.

Every API failure is an :class:`ApiError` built from the server's ``metav1.Status``
body. :func:`classify` maps an error to what a controller should do with it, so
retry policy is decided in one function rather than at every call site.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: A condition's or Event's reason (metav1.Condition's validation).
_REASON = re.compile(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?")


class KubeloopError(Exception):
    """Base class of every error kubeloop raises."""


class ConfigError(KubeloopError):
    """A kubeconfig or in-cluster configuration is missing or invalid."""


class TransportError(KubeloopError):
    """The request did not get an HTTP response (connection refused, reset, TLS)."""


class RequestTimeout(TransportError):
    """No (complete) response within the client-side timeout."""


class TerminalError(KubeloopError):
    """Raised by a reconciler for a failure that retrying cannot fix.

    The controller logs it, records a Warning Event, sets the object's ``Ready``
    condition to False with ``reason`` and the message (custom resources with a status
    subresource; see ``ControllerOptions.terminal_error_condition``), and does not
    requeue the request: the next change to the object brings it back.

    ``reason`` is the condition's and the Event's reason, CamelCase as Kubernetes
    requires (default ``ReconcileFailed``): ``TerminalError("spec.size must be even",
    reason="InvalidSpec")``.
    """

    def __init__(self, *args: object, reason: str = "ReconcileFailed") -> None:
        if not _REASON.fullmatch(reason):
            raise ValueError(
                f"TerminalError reason must be CamelCase, like InvalidSpec: {reason!r}"
            )
        super().__init__(*args)
        self.reason = reason


class CacheSyncTimeout(KubeloopError, TimeoutError):
    """The caches did not sync within ``ManagerOptions.cache_sync_timeout``.

    The message names each informer that had not listed yet and why (its last list or
    watch failure, e.g. a CRD that is not installed or a LIST that RBAC refuses), so
    the operator's last log line says what to fix. Also a :class:`TimeoutError`.
    """

    def __init__(self, seconds: float, pending: dict[str, str | None]) -> None:
        reasons = "; ".join(
            f"{name}: {why or 'no answer to its list yet'}" for name, why in pending.items()
        )
        super().__init__(f"caches did not sync within {seconds:g}s: {reasons}")
        #: informer name -> why it had not synced (None: no failure seen, just slow)
        self.pending = pending


@dataclass(frozen=True)
class Cause:
    """One field-level cause from a Status' ``details.causes``."""

    reason: str
    message: str
    field: str


class ApiError(KubeloopError):
    """An error response from the API server (a ``metav1.Status``)."""

    status_code: int = 0

    def __init__(
        self,
        status_code: int,
        reason: str,
        message: str,
        *,
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status_code} {reason}: {message}")
        self.status_code = status_code
        self.reason = reason
        self.message = message
        self.details = dict(details or {})
        self.retry_after = retry_after

    @property
    def causes(self) -> list[Cause]:
        return [
            Cause(c.get("reason", ""), c.get("message", ""), c.get("field", ""))
            for c in self.details.get("causes", []) or []
        ]

    @classmethod
    def from_status(
        cls, status_code: int, body: Any, *, retry_after: float | None = None
    ) -> ApiError:
        """Build the most specific subclass from an HTTP status and a decoded body."""
        reason, message, details = "", "", None
        if isinstance(body, Mapping) and body.get("kind") == "Status":
            reason = str(body.get("reason") or "")
            message = str(body.get("message") or "")
            details = body.get("details")
            status_code = int(body.get("code") or status_code)
        elif body:
            message = str(body)[:1000]
        klass = _class_for(status_code, reason)
        return klass(
            status_code,
            reason or klass.__name__,
            message,
            details=details,
            retry_after=retry_after,
        )


class BadRequest(ApiError):
    """400: the request itself is malformed."""


class Unauthorized(ApiError):
    """401: no or bad credentials."""


class Forbidden(ApiError):
    """403: RBAC denies the request (or a namespace is terminating)."""


class NotFound(ApiError):
    """404: the object (or resource type) does not exist."""


class MethodNotAllowed(ApiError):
    """405: the verb is not supported on this resource."""


class Conflict(ApiError):
    """409 Conflict: the write carried a stale resourceVersion."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: create of a name that is taken."""


class Gone(ApiError):
    """410: the requested resourceVersion has been compacted (Expired)."""


class Invalid(ApiError):
    """422: the object failed validation; :attr:`causes` names the fields."""


class TooManyRequests(ApiError):
    """429: throttled; :attr:`retry_after` says how long to wait."""


class ServerError(ApiError):
    """5xx: the server failed; retry with backoff."""


class ServerTimeout(ServerError):
    """504 or reason Timeout: the server gave up; retry with backoff."""


def _class_for(code: int, reason: str) -> type[ApiError]:
    if code == 409:
        return AlreadyExists if reason == "AlreadyExists" else Conflict
    if code == 504 or reason in ("Timeout", "ServerTimeout"):
        return ServerTimeout
    if code >= 500:
        return ServerError
    return {
        400: BadRequest,
        401: Unauthorized,
        403: Forbidden,
        404: NotFound,
        405: MethodNotAllowed,
        410: Gone,
        422: Invalid,
        429: TooManyRequests,
    }.get(code, ApiError)


class ErrorClass(enum.Enum):
    """What to do about an error."""

    #: 409 Conflict: re-read the latest object, re-apply the change, retry soon.
    CONFLICT = "conflict"
    #: 429, 5xx, timeouts, connection errors: transient, back off and retry.
    BACKOFF = "backoff"
    #: 401, 403, 404, 409 AlreadyExists, other 4xx: the request was well formed but the
    #: cluster is not (yet) in a state that admits it: RBAC not granted yet, a CRD not
    #: established yet, an object created or deleted by someone else. Repeating the call
    #: at once gets the same answer, so inline retry loops leave these alone; a
    #: controller requeues the object with its (capped) per-item backoff, so it is
    #: reconciled again once the cluster changes, never dropped.
    REQUEUE = "requeue"
    #: 400, 405, 422 (the API says the request itself is invalid) and TerminalError
    #: (the reconciler says so): retrying the same request cannot help.
    TERMINAL = "terminal"


#: The API errors that say the request itself is malformed or invalid.
_INVALID_REQUEST = BadRequest | MethodNotAllowed | Invalid


def classify(err: BaseException) -> ErrorClass:
    """The retry class of ``err``.

    Only the reconciler (:class:`TerminalError`) or the API (400, 405, 422) can say a
    request is hopeless; every other failure is retried with backoff, so an object is
    never dropped for longer than its controller's maximum backoff. Unknown exceptions
    back off too (they may be bugs that a later state avoids), but never in a tight loop.
    """
    if isinstance(err, Conflict):
        return ErrorClass.CONFLICT
    if isinstance(err, TerminalError | _INVALID_REQUEST):
        return ErrorClass.TERMINAL
    if isinstance(err, TooManyRequests | ServerError | TransportError | TimeoutError):
        return ErrorClass.BACKOFF
    if isinstance(err, ApiError):
        return ErrorClass.REQUEUE
    return ErrorClass.BACKOFF


STATUS_REASONS: Mapping[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
"""The ``reason`` a ``metav1.Status`` carries for an HTTP code, as the apiserver pairs
them (what clients, kubeloop's :func:`ApiError.from_status` included, classify by)."""

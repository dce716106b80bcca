"""Fault rules: which requests a fault applies to (:class:`Match`) and what it does (actions).

Actions are small frozen records; the proxy interprets them. Errors are answered the
way the apiserver answers them (a ``metav1.Status`` JSON body, ``Retry-After`` where
the apiserver's own throttling sends it), so clients take the code paths they would
take for real.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from kubeloop._errors import STATUS_REASONS
from kubeloop.testing._requestinfo import RequestInfo

# -- actions -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delay:
    """Hold the request for ``seconds``, then go on (other rules may still act on it)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer with ``status`` and a ``metav1.Status`` body; the apiserver never sees it.

    ``body`` replaces that body with raw bytes of ``content_type``: what a misconfigured
    proxy or load balancer in the path sends (an HTML page with a 200, a truncated JSON),
    which a client must survive as it survives an error status."""

    status: int
    retry_after: float | None = None
    reason: str | None = None
    message: str | None = None
    body: bytes | None = None
    content_type: str = "application/json"


@dataclass(frozen=True, slots=True)
class Reset:
    """Abort the client's TCP connection (RST) without an answer."""


@dataclass(frozen=True, slots=True)
class DropResponse:
    """Forward the request and let the API server act on it, then reset the client's
    connection instead of answering: the write is committed, the client never learns.
    A retried create then meets ``AlreadyExists``, a retried update a ``Conflict``.
    (Not for watches.)"""


@dataclass(frozen=True, slots=True)
class StaleRead:
    """Serve reads as of etcd ``revision``, as a lagging API server would (Sieve's
    "time travel"): a LIST is answered at exactly that revision, a GET with the object
    as it was then (404 if it did not exist yet), a WATCH starts from it and replays
    what came after. The revision must not be compacted yet. (Only get, list, watch.)"""

    revision: int


@dataclass(frozen=True, slots=True)
class DropEvents:
    """Leave watch events out of a stream (Sieve's "unobserved state": the client never
    sees a transition): those of ``types`` (empty: any but BOOKMARK), of the object
    ``name`` if given, at most ``count`` per stream (None: all). JSON watches only.
    The client's resourceVersion then lags: a watch it resumes replays what it missed."""

    types: tuple[str, ...] = ()
    name: str | None = None
    count: int | None = None


@dataclass(frozen=True, slots=True)
class Hang:
    """Read the request and never answer: a blackhole. After ``seconds`` (None: until
    the rule is removed or the proxy stops) the connection is reset, as a peer that
    comes back after a partition finds its old connection gone; or, with
    ``release="forward"``, the request goes on to the API server then, late, as a
    packet held in a queue arrives after the network heals (unless the client gave up
    first)."""

    seconds: float | None = None
    release: Literal["reset", "forward"] = "reset"

    def __post_init__(self) -> None:
        if self.release not in ("reset", "forward"):
            raise ValueError(f"Hang release must be 'reset' or 'forward', not {self.release!r}")


@dataclass(frozen=True, slots=True)
class CutWatch:
    """End a watch stream after ``after_events`` events or ``after_seconds`` seconds,
    whichever comes first. ``abort=False`` ends it cleanly, as the apiserver's own
    ``timeoutSeconds`` does; ``abort=True`` resets the connection mid-stream.

    ``types`` and ``name`` narrow which events count towards ``after_events`` (the
    others pass and are not counted): ``CutWatch(1, types=("DELETED",), name="x")``
    breaks the stream just after it delivered the delete of ``x``, as a connection lost
    between two events does. JSON watches only, as :class:`DropEvents`."""

    after_events: int | None = None
    after_seconds: float | None = None
    abort: bool = False
    types: tuple[str, ...] = ()
    name: str | None = None

    def __post_init__(self) -> None:
        if self.after_events is None and self.after_seconds is None:
            raise ValueError("CutWatch needs after_events or after_seconds")
        if self.after_events is not None and self.after_events < 0:
            raise ValueError(f"CutWatch after_events must be >= 0, not {self.after_events}")
        if (self.types or self.name is not None) and self.after_events is None:
            raise ValueError("CutWatch types and name narrow after_events: give it too")

    @property
    def narrowed(self) -> bool:
        """Whether only some events count towards ``after_events``."""
        return bool(self.types) or self.name is not None


Action = Delay | Respond | Reset | DropResponse | StaleRead | Hang | CutWatch | DropEvents


_MESSAGES = {
    429: "Too many requests, please try again later.",
    500: "Internal error occurred: injected by the fault proxy",
    503: "The server is currently unable to handle the request",
    504: "The server was unable to return a response in the time allotted",
}


def too_many_requests(retry_after: float = 1.0) -> Respond:
    """429 with ``Retry-After``, as the apiserver's max-in-flight and APF filters send it."""
    return Respond(429, retry_after=retry_after)


def internal_error() -> Respond:
    return Respond(500)


def service_unavailable(retry_after: float | None = None) -> Respond:
    return Respond(503, retry_after=retry_after)


def gateway_timeout() -> Respond:
    return Respond(504)


def status_reason(action: Respond) -> str:
    """The ``metav1.Status`` reason sent for ``action`` (``TooManyRequests`` for a 429)."""
    return action.reason or STATUS_REASONS.get(action.status, "")


def status_body(action: Respond) -> bytes:
    """The ``metav1.Status`` JSON the apiserver would send for ``action``."""
    reason = status_reason(action)
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": action.message or _MESSAGES.get(action.status, f"injected {action.status}"),
        "reason": reason,
        "code": action.status,
    }
    if action.retry_after is not None:
        body["details"] = {"retryAfterSeconds": int(max(1, round(action.retry_after)))}
    return json.dumps(body).encode()


# -- matching ----------------------------------------------------------------------------


def _set(value: str | Iterable[str] | None) -> frozenset[str] | None:
    if value is None:
        return None
    return frozenset({value}) if isinstance(value, str) else frozenset(value)


@dataclass(frozen=True)
class Match:
    """Which requests a rule applies to; every given field must match, None matches all.

    ``verb``, ``resource`` and ``client`` take one value or a set. ``resource`` is the
    plural (``configmaps``, ``nodepools``); ``subresource`` ``""`` matches only requests
    without one, and ``namespace`` ``""`` only requests outside any namespace (a
    cluster-wide list or watch, a cluster-scoped kind). ``user_agent`` matches a substring
    of the User-Agent header.
    """

    verb: frozenset[str] | None = None
    resource: frozenset[str] | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    watch: bool | None = None
    client: frozenset[str] | None = None
    user_agent: str | None = None

    @classmethod
    def of(
        cls,
        *,
        verb: str | Iterable[str] | None = None,
        resource: str | Iterable[str] | None = None,
        subresource: str | None = None,
        namespace: str | None = None,
        name: str | None = None,
        watch: bool | None = None,
        client: str | Iterable[str] | None = None,
        user_agent: str | None = None,
    ) -> Match:
        return cls(
            verb=_set(verb),
            resource=_set(resource),
            subresource=subresource,
            namespace=namespace,
            name=name,
            watch=watch,
            client=_set(client),
            user_agent=user_agent,
        )

    def matches(self, info: RequestInfo, client: str, user_agent: str) -> bool:
        return (
            (self.verb is None or info.verb in self.verb)
            and (self.resource is None or info.resource in self.resource)
            and (self.subresource is None or (info.subresource or "") == self.subresource)
            and (self.namespace is None or (info.namespace or "") == self.namespace)
            and (self.name is None or info.name == self.name)
            and (self.watch is None or info.watch == self.watch)
            and (self.client is None or client in self.client)
            and (self.user_agent is None or self.user_agent in user_agent)
        )


@dataclass(eq=False)
class Rule:
    """A fault in force: ``action`` for requests that match ``match``, after the first
    ``skip`` of them, at most ``times`` times (None: unlimited), each with
    ``probability`` (drawn from a RNG seeded by the proxy's seed and the rule's id, so
    a run can be repeated)."""

    id: int
    match: Match
    action: Action
    times: int | None = None
    probability: float = 1.0
    #: Let the first ``skip`` matching requests through: the fault strikes at a chosen
    #: moment ("the third status update"), as Sieve's triggers do.
    skip: int = 0
    #: How many times it has acted, and how many requests it matched.
    hits: int = 0
    seen: int = 0
    seed: int = 0
    #: Name in the log's ``action`` field instead of the action's (e.g. ``"partition"``).
    label: str | None = None
    _rng: random.Random = field(init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], not {self.probability}")
        if self.times is not None and self.times < 0:
            raise ValueError(f"times must be >= 0, not {self.times}")
        if self.skip < 0:
            raise ValueError(f"skip must be >= 0, not {self.skip}")
        self._rng = random.Random(f"{self.seed}:{self.id}")

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times

    def take(self, info: RequestInfo, client: str, user_agent: str) -> bool:
        """Whether this rule acts on the request (and count it if so)."""
        if not self.match.matches(info, client, user_agent):
            return False
        if isinstance(self.action, CutWatch | DropEvents) and not info.watch:
            return False
        if isinstance(self.action, DropResponse) and info.watch:
            return False
        if isinstance(self.action, StaleRead) and info.verb not in ("get", "list", "watch"):
            return False
        with self._lock:
            self.seen += 1
            if self.seen <= self.skip or self.exhausted:
                return False
            if self.probability < 1.0 and self._rng.random() >= self.probability:
                return False
            self.hits += 1
            return True

"""Disciplined writes: status through ``/status`` only when it changed, conflicts re-applied.

Two rules from operating controllers side by side, made into functions:

* **Write only what changed.** :func:`update_status` applies the caller's change
  to a copy of the status and sends nothing if the result equals what is
  there. An unchanged write still bumps ``resourceVersion``, comes back on the
  watch and feeds a reconcile loop.
* **A 409 Conflict is normal.** It means another writer got there first. The
  answer is to re-read the object *live from the API* (a cache may still hold
  the stale copy), re-apply only the caller's change and try again, a few
  times (client-go's ``DefaultRetry``). Everything else (Invalid, Forbidden,
  NotFound, ...) is raised on the first try: retrying a permanent error only
  adds load.
* **A status describes one generation.** If the re-read shows a newer
  ``metadata.generation`` than the reconcile read, the status it computed is
  about a spec that no longer exists: :func:`update_status` stops with
  :class:`StaleGeneration` instead of re-applying it, and the object is
  reconciled again at the new generation. So ``observedGeneration`` never goes
  backwards, even with two controllers writing one object's status.
* **A conflict says who.** Every 409 is logged with the writers that changed the
  object since our read (field manager, operation, subresource, time, from
  ``managedFields``) and counted in ``kubeloop_conflict_writers_total``.

The change is a ``mutate`` function rather than a finished object, so the retry
re-applies *it* and never re-runs the reconcile's expensive work.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubeloop._backoff import DEFAULT_RETRY, Backoff
from kubeloop._client import Client
from kubeloop._conditions import ConditionStatus, set_condition
from kubeloop._errors import Conflict, NotFound
from kubeloop._log import CONTROLLER
from kubeloop._metrics import CURRENT, RUNTIME_METRICS, RuntimeMetrics
from kubeloop._resource import Object, Resource, name_of, namespace_of
from kubeloop._retry import retry_on_conflict
from kubeloop._writers import writers_of, writers_since

log = logging.getLogger("kubeloop.status")

Status = dict[str, Any]
StatusMutation = Callable[[Status], None]
"""Edits a status dict in place. May be called more than once (once per conflict),
each time on a fresh copy of the latest status, so it must only set values it
already knows: never re-read the object or redo expensive work inside it."""

ObjectMutation = Callable[[Object], None]
"""Edits a whole object in place; the same rules as :data:`StatusMutation`."""


def same(a: Any, b: Any) -> bool:
    """Whether two decoded JSON values are the same JSON.

    Like ``==``, except that ``true`` never equals ``1`` (Python says it does).
    ``1`` and ``1.0`` stay equal on purpose: the server writes a whole float back
    as ``1``, and calling that a change would rewrite the status forever.
    """
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, dict):
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(same(value, b[key]) for key, value in a.items())
        )
    if isinstance(a, list):
        return (
            isinstance(b, list)
            and len(a) == len(b)
            and all(same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(b, dict | list):
        return False
    return bool(a == b)


#: The immutable JSON scalars, which a copy of a JSON tree shares instead of copying.
_SCALARS = (str, int, float, bool, type(None))


def _copy_json(value: Any) -> Any:
    """A deep copy of a decoded JSON value: dicts and lists rebuilt, scalars shared, and
    anything else (a transform's tuple, a custom type) through :func:`copy.deepcopy`.
    The same result as deepcopy for the values a status holds, at a fraction of its cost
    (no memo table, no dispatch per value): it runs once per status write."""
    if type(value) is dict:
        return {k: v if type(v) in _SCALARS else _copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [v if type(v) in _SCALARS else _copy_json(v) for v in value]
    if type(value) in _SCALARS:
        return value
    return copy.deepcopy(value)


def mutated_status(obj: Object, mutate: StatusMutation) -> Status | None:
    """``mutate`` applied to a deep copy of ``obj["status"]`` (``{}`` if missing),
    or ``None`` if that changed nothing. ``obj`` itself is never modified."""
    current = obj.get("status")
    if not isinstance(current, dict):
        current = {}
    status: Status = _copy_json(current)
    mutate(status)
    return None if same(status, current) else status


class StaleGeneration(Conflict):
    """A status write hit 409 Conflict and the live object has moved on to another
    ``metadata.generation`` than the one the reconcile read: its status is not
    re-applied (it would describe a spec nobody processed, or undo a newer
    ``observedGeneration``). A :class:`~kubeloop._errors.Conflict`, so the
    controller requeues the object and reconciles the new generation."""

    def __init__(self, what: str, read: object, live: object) -> None:
        super().__init__(
            409,
            "Conflict",
            f"{what}: generation moved from {read} to {live} since the reconcile read it; "
            "not re-applying a status computed for the old spec",
        )
        self.read_generation = read
        self.live_generation = live


class _Stop(Exception):
    """Carries a :class:`StaleGeneration` out of ``retry_on_conflict``, which would
    otherwise retry it as any Conflict."""

    def __init__(self, err: StaleGeneration) -> None:
        self.err = err


class _Accounting:
    """The metric children one write touches, looked up once."""

    def __init__(
        self, metrics: RuntimeMetrics | None, controller: str | None, resource: Resource
    ) -> None:
        # Inside a reconcile, count where its controller counts (its manager's registry).
        self.metrics = metrics if metrics is not None else (CURRENT.get() or RUNTIME_METRICS)
        # The label must be a string; "" marks a write made outside any controller.
        self.controller = controller if controller is not None else (CONTROLLER.get() or "")
        self.resource = resource.key
        self.conflicts = 0

    def skipped(self, subresource: str) -> None:
        self.metrics.writes_skipped_total.labels(self.controller, self.resource, subresource).inc()

    def conflict(self, outcome: str) -> None:
        self.metrics.conflicts_total.labels(self.controller, self.resource, outcome).inc()

    def who(self, client: Client, base: Object, live: Object, what: str) -> list[str]:
        """Name (log and count) the writers that changed ``live`` since ``base``, the
        object our conflicting write was based on; returns their manager names."""
        others = writers_since(client.writers.at(base), writers_of(live) or ())
        names = list(dict.fromkeys(w.manager for w in others))
        for name in names:
            self.metrics.conflict_writers_total.labels(self.controller, name).inc()
        log.info(
            "conflict on %s: changed since our read (resourceVersion %s -> %s) by %s",
            what,
            (base.get("metadata") or {}).get("resourceVersion"),
            (live.get("metadata") or {}).get("resourceVersion"),
            ", ".join(str(w) for w in others) or "an unknown writer",
            extra={"other_managers": names},
        )
        return names


async def _retrying(
    attempt: Callable[[], Awaitable[Object]], acct: _Accounting, backoff: Backoff, what: str
) -> Object:
    """``retry_on_conflict`` with every conflict counted: ``retried`` when another
    try follows, ``gave_up`` when it was the last; plus one ``resolved`` when a
    try succeeds after at least one conflict, or ``superseded`` when a status
    write stopped for a new generation."""

    def on_conflict(n: int, err: Conflict) -> None:
        acct.conflicts += 1
        if n >= backoff.steps:
            acct.conflict("gave_up")
            log.info("giving up on %s after %d conflicts: %s", what, n, err.message)
        else:
            acct.conflict("retried")
            log.debug("conflict on %s (try %d); re-reading", what, n)

    try:
        result = await retry_on_conflict(attempt, backoff=backoff, on_conflict=on_conflict)
    except _Stop as stop:
        acct.conflict("superseded")
        log.info("%s", stop.err.message)
        raise stop.err from None
    if acct.conflicts:
        acct.conflict("resolved")
    return result


async def _name_last_writers(
    client: Client, resource: Resource, base: Object, acct: _Accounting, what: str
) -> None:
    """After the last conflict no re-read follows; read once more, only to say who."""
    try:
        live = await client.get(resource, name_of(base), namespace_of(base))
    except Exception as err:  # best effort: the Conflict itself is what the caller gets
        log.debug("could not re-read %s to name the other writer: %s", what, err)
        return
    acct.who(client, base, live, what)


def _describe(resource: Resource, name: str, namespace: str | None) -> str:
    return f"{resource.key} {namespace}/{name}" if namespace else f"{resource.key} {name}"


def _same_incarnation(uid: str | None, latest: Object, what: str) -> None:
    # A name can be reused: if the object was deleted and re-created meanwhile,
    # the status we computed describes an object that no longer exists.
    latest_uid = (latest.get("metadata") or {}).get("uid")
    if uid and latest_uid and latest_uid != uid:
        raise NotFound(404, "NotFound", f"{what} was re-created (uid {uid} -> {latest_uid})")


async def update_status(
    client: Client,
    resource: Resource,
    obj: Object,
    mutate: StatusMutation,
    *,
    controller: str | None = None,
    metrics: RuntimeMetrics | None = None,
    backoff: Backoff = DEFAULT_RETRY,
) -> Object:
    """Apply ``mutate`` to ``obj``'s status and write it through the ``status``
    subresource, only if it changed; return the server's object.

    ``mutate`` edits a deep copy of ``obj["status"]`` (``{}`` if missing). If the
    result equals the current status nothing is sent, ``writes_skipped_total`` is
    counted and ``obj`` itself is returned. ``obj`` is never modified (it may be
    a shared cache entry). Otherwise the object is PUT to
    ``/status`` carrying ``obj``'s ``resourceVersion``, so the write fails rather
    than overwrite a newer version.

    On 409 Conflict the latest object is read live from the API (a cache could
    still hold the stale copy) and the writers that changed it since ``obj`` are
    logged and counted (``conflict_writers_total{other_manager}``). If its
    ``metadata.generation`` is still the one ``obj`` has, ``mutate`` is applied
    to *its* status and the write is tried again (skipped if now unchanged), at
    most ``backoff.steps`` tries in all; then the Conflict is raised and the
    workqueue's backoff takes over. If the generation moved on,
    :class:`StaleGeneration` is raised at once: nothing is written, and the
    controller reconciles the new generation. Conflicts are counted in
    ``conflicts_total`` by outcome. Every other error (Invalid, Forbidden,
    NotFound, ...) is raised at once; throttling was already retried by the client.

    **observedGeneration, or how no update is lost.** ``status.observedGeneration``
    claims "the spec of this generation has been acted on". The closure must
    capture the generation the reconcile actually processed, never read it again
    after a conflict::

        generation = pool["metadata"]["generation"]
        await provision(pool["spec"])           # slow: another writer may change spec

        def done(status: dict[str, Any]) -> None:
            status["observedGeneration"] = generation
            status["scaleOperation"] = "inactive"

        await update_status(client, NODEPOOLS, pool, done)

    If an autoscaler raised ``spec.targetNodes`` during ``provision``, the write
    gets 409 and the re-read shows generation + 1: :class:`StaleGeneration` is
    raised, ``done`` is not re-applied, and the next reconcile acts on the new
    spec. Re-applying it would be harmless here, but not when another writer
    (a second instance, a stale replica) already wrote a newer observedGeneration:
    then it would go backwards. Reading ``latest["metadata"]["generation"]``
    inside ``mutate`` would mark a spec nobody processed as done: a lost update.

    Args:
        client: the API client; the conflict re-read uses it, never a cache.
        resource: the resource type of ``obj``; it must have a status subresource.
        obj: the object as the reconcile read it; must carry
            ``metadata.resourceVersion``.
        mutate: edits a status dict in place; see :data:`StatusMutation`.
        controller: the ``controller`` metric label. Default: the
            :data:`~kubeloop._log.CONTROLLER` context variable (set around every
            reconcile), or ``""`` outside one.
        metrics: where to count. Default: inside a reconcile, its controller's
            metrics (the manager's registry); elsewhere
            :data:`~kubeloop._metrics.RUNTIME_METRICS`.
        backoff: the conflict retry schedule. Default
            :data:`~kubeloop._backoff.DEFAULT_RETRY` (5 tries, 10 ms apart, jittered).

    Raises:
        ValueError: ``obj`` has no resourceVersion (nothing to guard the write).
        StaleGeneration: a conflict, and the object's generation is no longer
            the one ``obj`` has.
        Conflict: still conflicting after ``backoff.steps`` tries.
        NotFound: also when the object was deleted and re-created meanwhile.
    """
    meta = obj.get("metadata") or {}
    if not meta.get("resourceVersion"):
        raise ValueError("update_status needs an object read from the API (no resourceVersion)")
    name, namespace, uid = name_of(obj), namespace_of(obj), meta.get("uid")
    read_generation = meta.get("generation")
    what = _describe(resource, name, namespace) + " status"
    acct = _Accounting(metrics, controller, resource)
    base = obj  # what the next write is based on
    reread = False

    async def attempt() -> Object:
        nonlocal reread, base
        current = obj
        if reread:
            current = await client.get(resource, name, namespace)
            _same_incarnation(uid, current, what)
            acct.who(client, base, current, what)
            live_generation = (current.get("metadata") or {}).get("generation")
            if read_generation is not None and live_generation != read_generation:
                raise _Stop(StaleGeneration(what, read_generation, live_generation))
        reread = True
        base = current
        status = mutated_status(current, mutate)
        if status is None:
            acct.skipped("status")
            log.debug("%s unchanged; not writing", what)
            return current
        return await client.update(resource, {**current, "status": status}, subresource="status")

    try:
        return await _retrying(attempt, acct, backoff, what)
    except StaleGeneration:
        raise
    except Conflict:
        await _name_last_writers(client, resource, base, acct, what)
        raise


async def set_status_condition(
    client: Client,
    resource: Resource,
    obj: Object,
    type: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    *,
    observed_generation: int | None = None,
    controller: str | None = None,
    metrics: RuntimeMetrics | None = None,
    backoff: Backoff = DEFAULT_RETRY,
) -> Object:
    """Set one ``status.conditions`` entry through :func:`update_status`.

    How the runtime reports a terminal error on the object itself, e.g.
    ``Ready=False, reason=Forbidden``. Nothing is written when the condition
    already says exactly this; ``lastTransitionTime`` moves only when ``status``
    flips (see :func:`~kubeloop._conditions.set_condition`). Arguments are
    validated before any request (:class:`ValueError`).

    Args:
        observed_generation: the generation the condition describes. Default
            ``None``: no ``observedGeneration`` on the condition. Capture it from
            the object you processed, as for :func:`update_status`.
        controller, metrics, backoff: as for :func:`update_status`.
    """

    def mutate(st: Status) -> None:
        conditions = st.get("conditions")
        if not isinstance(conditions, list):
            conditions = st["conditions"] = []
        set_condition(conditions, type, status, reason, message, observed_generation)

    return await update_status(
        client, resource, obj, mutate, controller=controller, metrics=metrics, backoff=backoff
    )


async def retry_update(
    client: Client,
    resource: Resource,
    name: str,
    namespace: str | None,
    mutate: ObjectMutation,
    *,
    controller: str | None = None,
    metrics: RuntimeMetrics | None = None,
    backoff: Backoff = DEFAULT_RETRY,
) -> Object:
    """Read-modify-write of the main resource: GET the latest object, apply
    ``mutate`` to a deep copy, PUT it unless nothing changed; again on Conflict.

    Every try starts with a live GET, so ``mutate`` always edits the newest
    version and another writer's changes survive. Returns the server's object
    (the one read, when nothing changed; ``writes_skipped_total`` is counted with
    ``subresource=""``). Changes to ``status`` are dropped by the server when the
    resource has a status subresource: use :func:`update_status` for those.

    Args:
        namespace: ``None`` for cluster-scoped resources.
        mutate: edits the object in place; see :data:`ObjectMutation`.
        controller, metrics, backoff: as for :func:`update_status`.
    """
    what = _describe(resource, name, namespace)
    acct = _Accounting(metrics, controller, resource)
    base: Object | None = None  # the read the last (conflicting) write was based on

    async def attempt() -> Object:
        nonlocal base
        latest = await client.get(resource, name, namespace)
        if base is not None:
            acct.who(client, base, latest, what)
        base = latest
        changed = copy.deepcopy(latest)
        mutate(changed)
        if same(changed, latest):
            acct.skipped("")
            log.debug("%s unchanged; not writing", what)
            return latest
        # The read's resourceVersion is what makes this write safe; keep it even
        # if mutate dropped or changed it.
        changed.setdefault("metadata", {})["resourceVersion"] = latest["metadata"][
            "resourceVersion"
        ]
        return await client.update(resource, changed)

    try:
        return await _retrying(attempt, acct, backoff, what)
    except Conflict:
        if base is not None:
            await _name_last_writers(client, resource, base, acct, what)
        raise

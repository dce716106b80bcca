"""Oracles for tests under faults: they read the API server's state, never the operator's.

Two checks from the literature, both domain-free:

**Differential** (Sieve, OSDI'22): run the same workload twice, once without faults
(the reference) and once with them, and compare (1) the end state of the objects the
operator manages, normalised so that what legitimately differs between runs (uids,
resourceVersions, timestamps, managedFields) is left out, and (2) how many times each
object was created and deleted. (2) catches "deleted and re-created" bugs whose end
state looks right. Sieve flagged 45 of its 46 bugs this way.

    ref = RunRecord(await capture_state(client, [CONFIGMAPS], namespace=ns_a), ops_a)
    bad = RunRecord(await capture_state(client, [CONFIGMAPS], namespace=ns_b), ops_b)
    assert_no_differences(compare_runs(ref, bad))

Operation counts come from the fault proxy's log (:func:`operations_from_log`: the
writes clients made through it) or from a :class:`WatchRecorder` (ADDED and DELETED
events as the apiserver reports them, whoever made the change, garbage collector
included). Runs in different namespaces compare by name: :func:`capture_state` keys
objects by ``(resource, name)`` unless told otherwise.

**Invariants of every intermediate state** (Sieve's custom safety checkers):
:meth:`WatchRecorder.add_invariant` checks each change as it is recorded, with the
object before and after, e.g. :func:`never_decreases` for ``status.observedGeneration``.

**Eventually stable** (Anvil, OSDI'24, "eventually stable reconciliation"): once the
faults stop, the cluster must come to match the desired state within ``within`` seconds
and then keep matching it for ``stable_for`` seconds. :func:`eventually_stable` polls a
check (and, given a :class:`WatchRecorder`, re-checks after every event), and fails
with what still differed, or with what broke the match once it had held.

Public API (stable): :class:`Normalizer`, :data:`DEFAULT_DROP`, :class:`State`,
:data:`ObjectKey`, :func:`capture_state`, :func:`normalise`, :class:`OpCount`,
:func:`operations_from_log`, :class:`WatchRecorder` (``operations``, ``events``,
``objects``, ``version``, ``wait_for_event``, ``wait_for_count``, ``add_listener``,
``add_invariant``, ``violations``, ``assert_no_violations``), :class:`RecordedEvent`,
:data:`Invariant`, :func:`never_decreases`, :class:`Violation`, :class:`RunRecord`,
:class:`Difference`, :func:`compare_states`, :func:`compare_operations`,
:func:`compare_runs`, :func:`nondeterministic_paths`, :func:`assert_no_differences`,
:func:`subset_mismatches`, :func:`live_mismatches`, :func:`eventually_stable`,
:class:`Stable`, :class:`NotStable`.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from kubeloop._client import Client
from kubeloop._errors import Gone
from kubeloop._resource import Object, Resource
from kubeloop.testing._faultlog import FaultLog

_log = logging.getLogger("kubeloop.testing.oracles")

#: A path into an object: keys and list indexes; ``"*"`` matches any one step.
Path = tuple[str | int, ...]
#: How objects are identified across runs: (resource key, namespace or "", name).
ObjectKey = tuple[str, str, str]

# -- normalising ---------------------------------------------------------------------------

#: Fields that differ between two correct runs of the same workload. A dotted string is
#: split on dots; use a tuple for keys that contain dots (annotations, labels).
DEFAULT_DROP: tuple[str | Path, ...] = (
    "metadata.uid",
    "metadata.resourceVersion",
    "metadata.creationTimestamp",
    "metadata.deletionTimestamp",
    "metadata.managedFields",
    "metadata.selfLink",
    "metadata.generateName",
    "metadata.ownerReferences.*.uid",
    ("metadata", "annotations", "kubectl.kubernetes.io/last-applied-configuration"),
    "status.conditions.*.lastTransitionTime",
    "status.conditions.*.lastUpdateTime",
    "status.conditions.*.lastHeartbeatTime",
    "status.conditions.*.lastProbeTime",
)


def _path(spec: str | Path) -> Path:
    if isinstance(spec, tuple):
        return spec
    return tuple(int(p) if p.isdigit() else p for p in spec.split("."))


def _drop(node: Any, path: Path) -> None:
    if not path:
        return
    head, rest = path[0], path[1:]
    if isinstance(node, dict):
        keys = list(node) if head == "*" else [head]
        for key in keys:
            if key not in node:
                continue
            if rest:
                _drop(node[key], rest)
            else:
                del node[key]
    elif isinstance(node, list):
        if head == "*":
            indexes = range(len(node))
        elif isinstance(head, int) and head < len(node):
            indexes = range(head, head + 1)
        else:
            return
        if not rest:
            for i in sorted(indexes, reverse=True):
                del node[i]
            return
        for i in indexes:
            _drop(node[i], rest)


def _prune_empty(node: Any) -> Any:
    # dropping ownerReferences.*.uid must not leave {} that differs from "absent"
    if isinstance(node, dict):
        return {k: _prune_empty(v) for k, v in node.items() if v not in ({}, None)}
    if isinstance(node, list):
        return [_prune_empty(v) for v in node]
    return node


@dataclass(frozen=True)
class Normalizer:
    """What to leave out of an object before comparing: ``drop`` paths (default
    :data:`DEFAULT_DROP`) plus ``also_drop``; ``status=False`` drops the whole status."""

    drop: tuple[str | Path, ...] = DEFAULT_DROP
    also_drop: tuple[str | Path, ...] = ()
    status: bool = True

    def __call__(self, obj: Object) -> Object:
        out = copy.deepcopy(obj)
        for spec in (*self.drop, *self.also_drop):
            _drop(out, _path(spec))
        if not self.status:
            out.pop("status", None)
        pruned: Object = _prune_empty(out)
        return pruned


def normalise(obj: Object, normalizer: Normalizer | None = None) -> Object:
    """``obj`` without the fields :class:`Normalizer` drops (a copy)."""
    return (normalizer or Normalizer())(obj)


# -- end state -----------------------------------------------------------------------------


@dataclass(frozen=True)
class State:
    """Normalised objects by :data:`ObjectKey`."""

    objects: Mapping[ObjectKey, Object]

    def __len__(self) -> int:
        return len(self.objects)

    def kinds(self) -> dict[str, int]:
        """Objects per resource key."""
        out: dict[str, int] = {}
        for key in self.objects:
            out[key[0]] = out.get(key[0], 0) + 1
        return out


def _default_key(res: Resource, obj: Object, by_namespace: bool) -> ObjectKey:
    meta = obj.get("metadata") or {}
    ns = str(meta.get("namespace") or "") if by_namespace else ""
    return (res.key, ns, str(meta.get("name") or ""))


async def capture_state(
    client: Client,
    resources: Iterable[Resource],
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    normalizer: Normalizer | None = None,
    key: Callable[[Resource, Object], ObjectKey] | None = None,
    include: Callable[[Resource, Object], bool] | None = None,
) -> State:
    """The objects of ``resources`` (in ``namespace``, or all) as the apiserver has them
    now, normalised. Keys (and objects) leave the namespace out when ``namespace`` is
    given, so two runs in two namespaces compare object by object; pass ``key`` to map generated
    names to stable ones, ``include`` to skip objects (e.g. the kube-root-ca ConfigMap)."""
    norm = normalizer or Normalizer()
    if namespace is not None and key is None:  # compared across namespaces: leave it out
        norm = Normalizer(norm.drop, (*norm.also_drop, "metadata.namespace"), norm.status)
    objects: dict[ObjectKey, Object] = {}
    for res in resources:
        items, _ = await client.list_all(res, namespace, label_selector=label_selector)
        for obj in items:
            if include is not None and not include(res, obj):
                continue
            k = key(res, obj) if key else _default_key(res, obj, namespace is None)
            if k in objects:
                raise ValueError(f"two objects map to the key {k}; pass a key= function")
            objects[k] = norm(obj)
    return State(objects)


# -- create / delete counts ----------------------------------------------------------------


@dataclass
class OpCount:
    """How many times an object was created and deleted during a run."""

    creates: int = 0
    deletes: int = 0


def operations_from_log(
    log: FaultLog,
    *,
    resources: Iterable[Resource | str] | None = None,
    namespace: str | None = None,
    clients: Iterable[str] | None = None,
    by_namespace: bool = False,
) -> dict[ObjectKey, OpCount]:
    """Accepted creates and deletes per object from the fault proxy's log (only writes
    made through the proxy). Keys as :func:`capture_state` makes them (namespace left
    out unless ``by_namespace``)."""
    wanted = None
    if resources is not None:
        wanted = {r.key if isinstance(r, Resource) else r for r in resources}
    who = None if clients is None else set(clients)
    out: dict[ObjectKey, OpCount] = {}
    for e in log.writes():
        if e.verb not in ("create", "delete") or e.subresource or e.name is None:
            continue
        rkey = e.resource_key
        if rkey is None or (wanted is not None and rkey not in wanted):
            continue
        if namespace is not None and e.namespace != namespace:
            continue
        if who is not None and e.client not in who:
            continue
        k = (rkey, (e.namespace or "") if by_namespace else "", e.name)
        count = out.setdefault(k, OpCount())
        if e.verb == "create":
            count.creates += 1
        else:
            count.deletes += 1
    return out


@dataclass(frozen=True)
class RecordedEvent:
    """One watch event a :class:`WatchRecorder` saw."""

    type: str
    key: ObjectKey
    resource_version: str


@dataclass(frozen=True)
class Violation:
    """An invariant that did not hold after ``event``."""

    event: RecordedEvent
    problem: str

    def __str__(self) -> str:
        res, ns, name = self.event.key
        obj = f"{res} {ns + '/' if ns else ''}{name}"
        return f"{obj} at resourceVersion {self.event.resource_version}: {self.problem}"


#: ``check(event, old, new)``: the object before and after the event (None when absent);
#: returns the problems (empty: fine).
Invariant = Callable[[RecordedEvent, Object | None, Object | None], Iterable[str]]


def _get(obj: Object | None, path: Path) -> Any:
    node: Any = obj
    for step in path:
        if isinstance(node, dict):
            if step not in node:
                return None
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and step < len(node):
            node = node[step]
        else:
            return None
    return node


def never_decreases(field_path: str | Path) -> Invariant:
    """An invariant: the number at ``field_path`` (e.g. ``"status.observedGeneration"``)
    of one object never goes down while the object exists."""
    path = _path(field_path)
    shown = _render(path)

    def check(event: RecordedEvent, old: Object | None, new: Object | None) -> list[str]:
        before, after = _get(old, path), _get(new, path)
        if isinstance(before, int | float) and isinstance(after, int | float) and after < before:
            return [f"{shown} went from {before} to {after}"]
        if isinstance(before, int | float) and new is not None and after is None:
            return [f"{shown} was {before} and is gone"]
        return []

    return check


class WatchRecorder:
    """Watches ``resources`` from now on and keeps, per object, the ADDED and DELETED
    counts (Sieve's state-update summary), every event in order, and the latest
    version of each object (:attr:`objects`, not normalised).

    ``async with WatchRecorder(client, [CONFIGMAPS], namespace=ns) as rec: ...``
    Objects that exist when it starts are in :attr:`objects` but not counted as created.
    A watch that falls too far behind (410 Gone) fails the recorder: :meth:`stop` raises,
    because counts with a gap would be wrong.
    """

    def __init__(
        self,
        client: Client,
        resources: Iterable[Resource],
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        by_namespace: bool | None = None,
    ) -> None:
        self._client = client
        self._resources = list(resources)
        self._namespace = namespace
        self._selector = label_selector
        self._by_namespace = namespace is None if by_namespace is None else by_namespace
        self.operations: dict[ObjectKey, OpCount] = {}
        self.events: list[RecordedEvent] = []
        self.objects: dict[ObjectKey, Object] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._listeners: list[Callable[[RecordedEvent], None]] = []
        self._invariants: list[Invariant] = []
        #: What :meth:`add_invariant` checks found, in order.
        self.violations: list[Violation] = []
        #: Events applied so far; moves on with every event (see :meth:`wait_for_event`).
        self.version = 0
        self._next = asyncio.Event()  # set, and replaced, when the next event arrives
        self._failure: BaseException | None = None

    def key_of(self, res: Resource, obj: Object) -> ObjectKey:
        return _default_key(res, obj, self._by_namespace)

    def add_listener(self, fn: Callable[[RecordedEvent], None]) -> None:
        """Call ``fn`` after each event is applied (synchronously, in the recorder's task)."""
        self._listeners.append(fn)

    async def start(self) -> Self:
        for res in self._resources:
            items, rv = await self._client.list_all(
                res, self._namespace, label_selector=self._selector
            )
            for obj in items:
                self.objects[self.key_of(res, obj)] = obj
            self._tasks.append(asyncio.create_task(self._watch(res, rv), name=f"record {res.key}"))
        return self

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        if self._failure is not None:
            raise AssertionError(f"watch recorder failed: {self._failure}") from self._failure

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_for_event(self, timeout: float, *, since: int | None = None) -> bool:
        """Wait up to ``timeout`` seconds for an event after :attr:`version` ``since``
        (default: now); whether one came."""
        if since is not None and self.version > since:
            return True
        try:
            async with asyncio.timeout(timeout):
                await self._next.wait()
        except TimeoutError:
            return False
        return True

    async def wait_for_count(self, n: int, *, timeout: float) -> None:
        """Wait until at least ``n`` events have been recorded (TimeoutError after
        ``timeout`` seconds), e.g. before reading :attr:`operations` at the end of a run."""
        async with asyncio.timeout(timeout):
            while len(self.events) < n:
                await self._next.wait()

    async def _watch(self, res: Resource, rv: str) -> None:
        while True:
            try:
                async with contextlib.aclosing(
                    self._client.watch(
                        res,
                        self._namespace,
                        resource_version=rv,
                        label_selector=self._selector,
                        timeout_seconds=300,
                    )
                ) as events:
                    async for event in events:
                        obj = event.object
                        rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
                        if event.type != "BOOKMARK":
                            self._apply(res, event.type, obj, rv)
            except Gone as err:
                self._failure = err
                _log.error("watch recorder for %s lost events: %s", res.key, err)
                return
            except asyncio.CancelledError:
                raise
            except Exception as err:  # connection trouble: resume from the last version
                _log.info("watch recorder for %s resumes after %s", res.key, err)
                await asyncio.sleep(0.2)

    def add_invariant(self, check: Invariant) -> None:
        """Check ``check(event, old, new)`` on every change as it is recorded (Sieve's
        custom safety checker: an invariant of every intermediate state, which polling
        would miss). What it returns is kept in :attr:`violations` with the event."""
        self._invariants.append(check)

    def assert_no_violations(self) -> None:
        """Fail listing every invariant violation seen so far."""
        if self.violations:
            lines = "\n".join(f"  {v}" for v in self.violations)
            raise AssertionError(f"{len(self.violations)} invariant violation(s):\n{lines}")

    def _apply(self, res: Resource, kind: str, obj: Object, rv: str) -> None:
        key = self.key_of(res, obj)
        old = self.objects.get(key)
        count = self.operations.setdefault(key, OpCount())
        if kind == "ADDED":
            count.creates += 1
            self.objects[key] = obj
        elif kind == "DELETED":
            count.deletes += 1
            self.objects.pop(key, None)
        else:
            self.objects[key] = obj
        event = RecordedEvent(kind, key, rv)
        self.events.append(event)
        new = None if kind == "DELETED" else obj
        for check in self._invariants:
            for problem in check(event, old, new):
                self.violations.append(Violation(event, str(problem)))
        for fn in self._listeners:
            fn(event)
        self.version += 1
        arrived, self._next = self._next, asyncio.Event()
        arrived.set()


# -- comparing runs ------------------------------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    """What one run left behind: its end state and its create/delete counts."""

    state: State
    operations: Mapping[ObjectKey, OpCount] = field(default_factory=dict)


DifferenceKind = Literal["missing", "extra", "field", "creates", "deletes"]


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


@dataclass(frozen=True)
class Difference:
    """One way the faulty run differs from the reference run."""

    key: ObjectKey
    kind: DifferenceKind
    path: str = ""
    reference: Any = None
    faulty: Any = None

    def __str__(self) -> str:
        res, ns, name = self.key
        obj = f"{res} {ns + '/' if ns else ''}{name}"
        if self.kind == "missing":
            return f"{obj}: missing after the faulty run (present in the reference)"
        if self.kind == "extra":
            return f"{obj}: present after the faulty run only"
        if self.kind == "field":
            return (
                f"{obj}: {self.path}: reference {_show(self.reference)}, "
                f"faulty {_show(self.faulty)}"
            )
        return f"{obj}: {self.kind} {self.faulty} times (reference {self.reference})"


_MISSING = object()


def _render(path: Path) -> str:
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def _diff(ref: Any, bad: Any, path: Path, out: list[tuple[Path, Any, Any]]) -> None:
    if isinstance(ref, dict) and isinstance(bad, dict):
        for k in sorted(set(ref) | set(bad)):
            _diff(ref.get(k, _MISSING), bad.get(k, _MISSING), (*path, k), out)
    elif isinstance(ref, list) and isinstance(bad, list) and len(ref) == len(bad):
        for i, (a, b) in enumerate(zip(ref, bad, strict=True)):
            _diff(a, b, (*path, i), out)
    elif ref != bad:
        out.append((path, ref, bad))


def _ignored(path: Path, patterns: Sequence[Path]) -> bool:
    for pattern in patterns:
        if len(pattern) <= len(path) and all(
            p == "*" or p == s for p, s in zip(pattern, path, strict=False)
        ):
            return True  # a prefix match: ignoring "status" ignores all below it
    return False


def compare_states(
    reference: State, faulty: State, *, ignore: Iterable[str | Path] = ()
) -> list[Difference]:
    """Objects missing, extra or different in ``faulty``; ``ignore`` lists field paths
    (and everything below them) that may differ, e.g. from :func:`nondeterministic_paths`."""
    patterns = [_path(p) for p in ignore]
    out: list[Difference] = []
    for key in sorted(set(reference.objects) | set(faulty.objects)):
        ref, bad = reference.objects.get(key), faulty.objects.get(key)
        if bad is None:
            out.append(Difference(key, "missing"))
            continue
        if ref is None:
            out.append(Difference(key, "extra"))
            continue
        found: list[tuple[Path, Any, Any]] = []
        _diff(ref, bad, (), found)
        for path, a, b in found:
            if not _ignored(path, patterns):
                out.append(
                    Difference(
                        key,
                        "field",
                        _render(path),
                        None if a is _MISSING else a,
                        None if b is _MISSING else b,
                    )
                )
    return out


def compare_operations(
    reference: Mapping[ObjectKey, OpCount], faulty: Mapping[ObjectKey, OpCount]
) -> list[Difference]:
    """Objects created or deleted a different number of times in ``faulty``."""
    out: list[Difference] = []
    for key in sorted(set(reference) | set(faulty)):
        ref, bad = reference.get(key, OpCount()), faulty.get(key, OpCount())
        if ref.creates != bad.creates:
            out.append(Difference(key, "creates", reference=ref.creates, faulty=bad.creates))
        if ref.deletes != bad.deletes:
            out.append(Difference(key, "deletes", reference=ref.deletes, faulty=bad.deletes))
    return out


def compare_runs(
    reference: RunRecord, faulty: RunRecord, *, ignore: Iterable[str | Path] = ()
) -> list[Difference]:
    """Sieve's differential check: end state and per-object create/delete counts."""
    return [
        *compare_states(reference.state, faulty.state, ignore=ignore),
        *compare_operations(reference.operations, faulty.operations),
    ]


def nondeterministic_paths(first: State, second: State) -> set[Path]:
    """Field paths that differ between two fault-free runs (Sieve's learned mask): pass
    them as ``ignore`` to :func:`compare_states`. List indexes become ``"*"``."""
    out: set[Path] = set()
    for key in set(first.objects) & set(second.objects):
        found: list[tuple[Path, Any, Any]] = []
        _diff(first.objects[key], second.objects[key], (), found)
        for path, _, _ in found:
            out.add(tuple("*" if isinstance(p, int) else p for p in path))
    return out


def assert_no_differences(differences: Sequence[Difference], what: str = "faulty run") -> None:
    """Fail listing every difference, one per line."""
    if differences:
        lines = "\n".join(f"  {d}" for d in differences)
        count = len(differences)
        raise AssertionError(f"{what}: {count} difference(s) from the reference:\n{lines}")


# -- eventually stable ---------------------------------------------------------------------

#: A check's answer: True/False, or what differs (empty: matches).
CheckResult = bool | Iterable[str]
Check = Callable[[], CheckResult | Awaitable[CheckResult]]


def subset_mismatches(actual: Any, expected: Any, path: str = "") -> list[str]:
    """How ``actual`` fails to contain ``expected``: every key of an expected mapping
    must be there with a matching value; lists must have the same length and match
    item by item; anything else must be equal. Empty: it matches."""
    where = path or "object"
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return [f"{where}: expected a mapping, got {_show(actual)}"]
        out: list[str] = []
        for k, v in expected.items():
            sub = f"{path}.{k}" if path else str(k)
            if k not in actual:
                out.append(f"{sub}: missing (expected {_show(v)})")
            else:
                out.extend(subset_mismatches(actual[k], v, sub))
        return out
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]
        out = []
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            out.extend(subset_mismatches(a, e, f"{path}[{i}]"))
        return out
    if actual == expected:
        return []
    return [f"{where}: expected {_show(expected)}, got {_show(actual)}"]


async def live_mismatches(
    client: Client,
    res: Resource,
    expected: Mapping[str, Object | None],
    *,
    namespace: str | None = None,
    only_expected: bool = False,
    label_selector: str | None = None,
) -> list[str]:
    """How the live objects of ``res`` in ``namespace`` (and ``label_selector``) differ
    from ``expected`` (name → partial object, or None: must not exist). Unless
    ``only_expected``, objects not named in ``expected`` are mismatches too."""
    items, _ = await client.list_all(res, namespace, label_selector=label_selector)
    live = {str(o["metadata"]["name"]): o for o in items}
    out: list[str] = []
    for name, want in sorted(expected.items()):
        got = live.get(name)
        if want is None:
            if got is not None:
                out.append(f"{res.key} {name}: exists, expected absent")
        elif got is None:
            out.append(f"{res.key} {name}: missing")
        else:
            out.extend(f"{res.key} {name}: {m}" for m in subset_mismatches(got, want))
    if not only_expected:
        out.extend(f"{res.key} {n}: unexpected" for n in sorted(set(live) - set(expected)))
    return out


@dataclass(frozen=True)
class Stable:
    """How :func:`eventually_stable` succeeded."""

    #: Seconds from the call until the state first matched (for reports, not asserts).
    converged_after: float
    #: Checks made in all, and while matched.
    checks: int
    stable_checks: int


class NotStable(AssertionError):
    """The state never matched in time, or matched and then stopped matching."""

    def __init__(self, message: str, mismatches: Sequence[str], *, broke: bool) -> None:
        super().__init__(message)
        self.mismatches = list(mismatches)
        #: True: it had matched and then broke (a stability violation), not a timeout.
        self.broke = broke


#: After a watch event wakes :func:`eventually_stable`, how long it lets others follow
#: before checking, so a burst of events costs one check, not one each.
_COALESCE = 0.02


async def _run_check(check: Check) -> list[str]:
    result = check()
    if inspect.isawaitable(result):
        result = await result
    if result is True:
        return []
    if result is False:
        return ["the check returned False"]
    return [str(m) for m in result]


async def eventually_stable(
    check: Check,
    *,
    within: float,
    stable_for: float,
    interval: float = 0.25,
    recorder: WatchRecorder | None = None,
    what: str = "the desired state",
) -> Stable:
    """Anvil's ESR as a test: ``check`` must hold within ``within`` seconds and then hold
    at every check for ``stable_for`` seconds; raise :class:`NotStable` with what
    differed otherwise.

    ``check`` (plain or async) returns True/False or the mismatches (empty: match), for
    example ``lambda: live_mismatches(client, POOLS, {"a": {"status": {...}}}, ...)``.
    It runs every ``interval`` seconds and, with a ``recorder``, also right after any
    watch event, so a change that breaks the match is seen when it happens. Polling
    alone can miss a flap shorter than ``interval``.
    """
    loop = asyncio.get_running_loop()
    start = loop.time()
    matched_at: float | None = None
    checks = stable = 0
    last: list[str] = []
    while True:
        seen = recorder.version if recorder is not None else 0
        mismatches = await _run_check(check)
        now = loop.time()
        checks += 1
        if not mismatches:
            stable += 1
            if matched_at is None:
                matched_at = now
            if now - matched_at >= stable_for:
                return Stable(matched_at - start, checks, stable)
        elif matched_at is not None:
            lines = "\n".join(f"  {m}" for m in mismatches)
            raise NotStable(
                f"{what} held for {now - matched_at:.1f}s, then stopped holding "
                f"(needed {stable_for:.1f}s):\n{lines}",
                mismatches,
                broke=True,
            )
        else:
            last = mismatches
            if now - start > within:
                lines = "\n".join(f"  {m}" for m in last)
                raise NotStable(
                    f"{what} not reached within {within:.1f}s; still differing:\n{lines}",
                    last,
                    broke=False,
                )
        if recorder is not None:
            if await recorder.wait_for_event(interval, since=seen):
                await asyncio.sleep(_COALESCE)  # a burst of events: check once after it
        else:
            await asyncio.sleep(interval)

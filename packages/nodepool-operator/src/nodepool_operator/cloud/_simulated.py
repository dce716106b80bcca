"""SimulatedCloud: a :class:`CloudProvider` whose VMs live in a SQLite file.

Why a file: the operator under test gets SIGKILLed and restarted, and a test or demo in
another process must see the same VMs, call counts and injected faults. Every call is
one short ``BEGIN IMMEDIATE`` transaction (it at least bumps the call counter), so a
create's idempotency check and insert are atomic across processes, and WAL mode keeps
plain readers from waiting on writers.

The async methods run their SQLite work in ``asyncio.to_thread``. A call cancelled while
in flight may still complete, as a real cloud call would: the "applied, response lost"
case the idempotency token exists for.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import json
import random
import secrets
import sqlite3
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar, get_args

from ._catalogue import CATALOGUE
from ._port import (
    CapacityUnavailable,
    CloudError,
    ClusterInfo,
    CreateRequest,
    IdempotencyMismatch,
    Instance,
    InstanceNotFound,
    InstanceState,
    InstanceType,
    InvalidRequest,
    MarketType,
    PermissionDenied,
    QuotaExceeded,
    SelectorTerm,
    Subnet,
    SubnetFull,
    TransientCloudError,
    check_request,
)

Method = Literal["create", "delete", "describe", "list", "start", "stop", "instance_types", "find"]
"""The counted (and fault-injectable) methods of the port."""

METHODS: tuple[Method, ...] = get_args(Method)

#: The simulated cloud's region (a Node's ``topology.kubernetes.io/region``).
SIMULATED_REGION = "sim-1"
#: Addresses in each simulated subnet (a /20, as EC2's default subnets, less its 5).
SUBNET_ADDRESSES = 4091

#: A simulated cluster's CA: base64, as EKS returns one, of no certificate.
SIMULATED_CA = "c2ltdWxhdGVkIGNsdXN0ZXIgQ0E="

# Faults are stored by class name so another process can raise them.
_ERRORS: dict[str, type[CloudError]] = {
    cls.__name__: cls
    for cls in (
        CloudError,
        QuotaExceeded,
        CapacityUnavailable,
        InstanceNotFound,
        TransientCloudError,
        InvalidRequest,
        IdempotencyMismatch,
        PermissionDenied,
        SubnetFull,
    )
}

_BUSY_TIMEOUT_S = 10.0  # a writer waits this long for another's short transaction
_COLUMNS = (
    "id, name, instance_type, image, state, tags, created_at, ready_at, user_data, capacity_type,"
    " zone"
)
_SCHEMA = (
    # state is stored as pending|stopped|terminated; running is derived from ready_at
    # when read, so booting needs no background task.
    """CREATE TABLE IF NOT EXISTS instances (
        id TEXT PRIMARY KEY, name TEXT NOT NULL, instance_type TEXT NOT NULL,
        image TEXT NOT NULL, state TEXT NOT NULL, tags TEXT NOT NULL,
        token TEXT UNIQUE, created_at REAL NOT NULL, ready_at REAL,
        user_data TEXT NOT NULL DEFAULT '',
        capacity_type TEXT NOT NULL DEFAULT 'on-demand')""",
    "CREATE TABLE IF NOT EXISTS calls (method TEXT PRIMARY KEY, count INTEGER NOT NULL)",
    # remaining is NULL for a probability fault; id order is injection order.
    """CREATE TABLE IF NOT EXISTS faults (
        id INTEGER PRIMARY KEY AUTOINCREMENT, method TEXT NOT NULL, error TEXT NOT NULL,
        remaining INTEGER, probability REAL, applied INTEGER NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS capacity (instance_type TEXT PRIMARY KEY, max_live INTEGER)",
    # a zone's own limit for a type, beside the type's limit in every zone
    """CREATE TABLE IF NOT EXISTS zone_capacity (instance_type TEXT NOT NULL, zone TEXT NOT NULL,
        max_live INTEGER NOT NULL, PRIMARY KEY (instance_type, zone))""",
    "CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
)

_T = TypeVar("_T")
_Op = Callable[[sqlite3.Connection, float], _T]


def _check_fault(method: str, error: type[CloudError]) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; one of {', '.join(METHODS)}")
    if _ERRORS.get(error.__name__) is not error:
        raise ValueError(f"cannot inject {error!r}; one of {', '.join(_ERRORS)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FailNext:
    """Make the next ``times`` calls of ``method`` fail with ``error``."""

    method: Method
    error: type[CloudError] = TransientCloudError
    """Default :class:`TransientCloudError`."""
    times: int = 1
    """Default 1."""
    applied: bool = False
    """Default False: fail before taking effect. True: take effect, then fail, as when the
    response is lost to a timeout (a create that made a VM the caller never heard of)."""

    def __post_init__(self) -> None:
        _check_fault(self.method, self.error)
        if self.times < 1:
            raise ValueError(f"times must be >= 1, got {self.times}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FailRandomly:
    """Make each call of ``method`` fail with ``error`` with ``probability``.

    Whether call number *n* fails is a function of (seed, method, error, n) alone, so a
    seed replays the same faults in any process, across restarts (``reset_calls``
    restarts the numbering).
    """

    method: Method
    probability: float
    error: type[CloudError] = TransientCloudError
    """Default :class:`TransientCloudError`."""
    applied: bool = False
    """Default False; as :attr:`FailNext.applied`."""

    def __post_init__(self) -> None:
        _check_fault(self.method, self.error)
        if not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"probability must be in [0, 1], got {self.probability}")


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultPlan:
    """Faults and limits to install into a cloud file, replacing whatever it had."""

    fail_next: Sequence[FailNext] = ()
    """Default none."""
    fail_randomly: Sequence[FailRandomly] = ()
    """Default none."""
    seed: int = 0
    """Seeds :attr:`fail_randomly`. Default 0."""
    capacity: Mapping[str, int] = field(default_factory=dict)
    """Per instance type, the most non-terminated VMs of that type; one more gets
    :class:`CapacityUnavailable`. Default: no limit."""
    list_lag_seconds: float = 0.0
    """``list`` omits VMs younger than this, as EC2's eventually consistent describe
    calls do; ``describe`` by id stays exact. Default 0.0 (no lag)."""

    def __post_init__(self) -> None:
        if any(limit < 0 for limit in self.capacity.values()):
            raise ValueError(f"capacity limits must be >= 0, got {dict(self.capacity)}")
        if self.list_lag_seconds < 0:
            raise ValueError(f"list_lag_seconds must be >= 0, got {self.list_lag_seconds}")


@dataclass(frozen=True, slots=True, kw_only=True)
class CloudSnapshot:
    """Everything the cloud holds at one moment, for reports and assertions."""

    instances: tuple[Instance, ...]
    """Every VM ever launched, terminated included, oldest first."""
    calls: dict[str, int]
    duplicates: int
    next_launch_in: float | None = None
    """Seconds from the snapshot until the next pending VM finishes booting (None: none is
    booting): a VM's kubelet starts when its boot ends, so the simulated kubelets look again
    then rather than at their next interval."""

    @property
    def live(self) -> tuple[Instance, ...]:
        """The VMs that are not terminated."""
        return tuple(i for i in self.instances if i.state != "terminated")

    def to_json(self) -> dict[str, object]:
        by_state: dict[str, int] = {}
        for inst in self.instances:
            by_state[inst.state] = by_state.get(inst.state, 0) + 1
        return {
            "live": len(self.live),
            "by_state": by_state,
            "duplicates": self.duplicates,
            "calls": self.calls,
            # the user data too, when the cloud recorded it: what each VM's boot was given
            # (the demo's test hands the AL2023 ones to nodeadm)
            "instances": [
                {"id": i.id, "name": i.name, "type": i.instance_type, "state": i.state}
                | ({"user_data": i.user_data} if i.user_data else {})
                for i in self.instances
            ],
        }


class _Fired(NamedTuple):
    error: type[CloudError]
    applied: bool

    def raise_for(self, method: str) -> CloudError:
        return self.error(f"injected {self.error.__name__} on {method}")


class SimulatedCloud:
    """A :class:`CloudProvider` backed by a SQLite file, with fault injection and drift helpers.

    Every ``SimulatedCloud`` on the same file, in any process, is the same cloud.

    Args:
        path: the SQLite file; created if missing (its directory must exist).
        boot_seconds: how long a VM launched or started *through this object* stays pending
            before it is running. Default 5.0. Derived from timestamps when read.
        quota: the most non-terminated VMs the cloud holds; one more gets
            :class:`QuotaExceeded`. Stored in the file so every process enforces it.
            Default None: keep the file's setting (unlimited for a new file).
        faults: installed into the file, replacing its faults, capacity limits, seed and
            list lag. Default None: keep the file's.
        clock: seconds since the epoch. Default ``time.time``; tests inject a fake.
        catalogue: the instance types on offer. Default :data:`CATALOGUE`.
        zones: the zones VMs launch in (each with one subnet of :data:`SUBNET_ADDRESSES`
            addresses), stored in the file like the quota. Default
            None: keep the file's (none for a new file: VMs have no zone, as before zones).
        subnet_addresses: with ``zones``, the addresses of each zone's subnet.

    The constructor and the methods that are not ``async`` (test and report helpers) each
    run one short SQLite transaction on the caller's thread; they are meant for setup,
    tests and reports, not for the operator's hot path.
    """

    def __init__(
        self,
        path: Path,
        *,
        boot_seconds: float = 5.0,
        quota: int | None = None,
        faults: FaultPlan | None = None,
        clock: Callable[[], float] = time.time,
        catalogue: Sequence[InstanceType] = CATALOGUE,
        zones: Sequence[str] | None = None,
        subnet_addresses: int = SUBNET_ADDRESSES,
    ) -> None:
        if boot_seconds < 0:
            raise ValueError(f"boot_seconds must be >= 0, got {boot_seconds}")
        if quota is not None and quota < 0:
            raise ValueError(f"quota must be >= 0, got {quota}")
        self._path = Path(path)
        self._boot_seconds = boot_seconds
        self._clock = clock
        self._types = {t.name: t for t in catalogue}
        conn = sqlite3.connect(self._path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")  # persistent: set once per file
        finally:
            conn.close()
        with self._transaction() as conn:
            for statement in _SCHEMA:
                conn.execute(statement)
            columns = {row[1] for row in conn.execute("PRAGMA table_info(instances)")}
            if "user_data" not in columns:  # a file from before launch settings existed
                conn.execute("ALTER TABLE instances ADD COLUMN user_data TEXT NOT NULL DEFAULT ''")
            if "capacity_type" not in columns:  # a file from before spot existed
                conn.execute(
                    "ALTER TABLE instances ADD COLUMN capacity_type TEXT NOT NULL "
                    "DEFAULT 'on-demand'"
                )
            if "zone" not in columns:  # a file from before zones
                conn.execute("ALTER TABLE instances ADD COLUMN zone TEXT NOT NULL DEFAULT ''")
            if zones is not None:
                _put_setting(conn, "zones", sorted(zones))
                _put_setting(conn, "subnet_addresses", subnet_addresses)
            if quota is not None:
                _put_setting(conn, "quota", quota)
            if faults is not None:
                _install(conn, faults)

    @property
    def path(self) -> Path:
        return self._path

    # -- the port ------------------------------------------------------------------------

    async def create(self, request: CreateRequest) -> Instance:
        return await self._call("create", lambda conn, now: self._create(conn, now, request))

    async def find(self, idempotency_token: str) -> Instance | None:
        def op(conn: sqlite3.Connection, now: float) -> Instance | None:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM instances WHERE token = ?", (idempotency_token,)
            ).fetchone()
            return None if row is None else _to_instance(row, now)

        return await self._call("find", op)

    async def delete(self, instance_id: str) -> None:
        def op(conn: sqlite3.Connection, now: float) -> None:
            conn.execute(
                "UPDATE instances SET state = 'terminated' WHERE id = ? AND state != 'terminated'",
                (instance_id,),
            )

        await self._call("delete", op)

    async def describe(self, instance_id: str) -> Instance:
        return await self._call("describe", lambda conn, now: _get(conn, now, instance_id))

    async def list(self, tags: dict[str, str]) -> builtins.list[Instance]:
        return await self._call("list", lambda conn, now: _list(conn, now, tags))

    async def start(self, instance_id: str) -> None:
        await self._call("start", lambda conn, now: self._start(conn, now, instance_id))

    async def stop(self, instance_id: str) -> None:
        await self._call("stop", lambda conn, now: _stop(conn, now, instance_id))

    async def resolve_image(self, image: str) -> str:
        """Every image is its own id here (no parameter store): a class's new image is
        drift, a parameter never moves. Not a counted call."""
        return image

    async def instance_types(self) -> builtins.list[InstanceType]:
        return await self._call(
            "instance_types", lambda conn, now: builtins.list(self._types.values())
        )

    @property
    def region(self) -> str:
        return SIMULATED_REGION

    async def subnets(self, terms: Sequence[SelectorTerm]) -> builtins.list[Subnet]:
        """Each zone's subnet (an id of the zone's hash, tagged ``Name: sim-<zone>`` and
        ``topology.kubernetes.io/zone: <zone>``) that a term selects (no terms: all), its
        free addresses less one per live VM in the zone. Not counted as a call."""

        def op(conn: sqlite3.Connection, now: float) -> builtins.list[Subnet]:
            size = int(_get_setting(conn, "subnet_addresses") or SUBNET_ADDRESSES)
            out = []
            for zone in _get_setting(conn, "zones") or []:
                if terms and not any(
                    _selects(t, _subnet_id(zone), _subnet_tags(zone)) for t in terms
                ):
                    continue
                used = _scalar(
                    conn,
                    "SELECT COUNT(*) FROM instances WHERE state != 'terminated' AND zone = ?",
                    zone,
                )
                out.append(Subnet(id=_subnet_id(zone), zone=zone, free_addresses=size - used))
            return out

        return await asyncio.to_thread(self._apply, op)

    async def security_groups(self, terms: Sequence[SelectorTerm]) -> builtins.list[str]:
        """The groups named by id (the simulated cloud has no others). Not counted."""
        return sorted({t.id for t in terms if t.id})

    async def describe_cluster(self, name: str) -> ClusterInfo:
        """A simulated cluster's coordinates (not counted: no fault is injected here; the
        simulated kubelets join the test's own cluster whatever the user data says)."""
        return ClusterInfo(
            name=name,
            endpoint=f"https://{name}.cluster.simulated.invalid",
            certificate_authority=SIMULATED_CA,
            service_cidr="10.100.0.0/16",
        )

    # -- behind the operator's back (drift and GC tests); not counted as calls --------------

    def machine(self, instance_type: str) -> InstanceType | None:
        """What a VM of this type has, as its kubelet reads it off the machine (the VM
        side's view, not a call)."""
        return self._types.get(instance_type)

    def stop_behind_the_back(self, instance_id: str) -> None:
        """Stop a VM as a person with console access would."""
        self._apply(lambda conn, now: _stop(conn, now, instance_id))

    def terminate_behind_the_back(self, instance_id: str) -> None:
        """Terminate a VM. Unlike ``delete``, an unknown id raises :class:`InstanceNotFound`."""

        def op(conn: sqlite3.Connection, now: float) -> None:
            _get(conn, now, instance_id)
            conn.execute("UPDATE instances SET state = 'terminated' WHERE id = ?", (instance_id,))

        self._apply(op)

    def leak(
        self,
        name: str,
        tags: Mapping[str, str],
        *,
        instance_type: str = "m5.large",
        image: str = "sim-image",
        user_data: str = "",
    ) -> Instance:
        """Launch a VM the operator never asked for (no token), e.g. one its crash orphaned.

        ``instance_type`` defaults to ``m5.large``, ``image`` to ``sim-image``, ``user_data``
        to none (its kubelet registers no Node). Quota and capacity limits do not apply.
        """
        return self._apply(
            lambda conn, now: self._insert(
                conn,
                now,
                name=name,
                instance_type=instance_type,
                image=image,
                tags=dict(tags),
                token=None,
                user_data=user_data,
            )
        )

    # -- fault injection ----------------------------------------------------------------

    def inject(
        self,
        method: Method,
        error: type[CloudError] = TransientCloudError,
        times: int = 1,
        *,
        applied: bool = False,
    ) -> None:
        """Make the next ``times`` calls of ``method`` fail; see :class:`FailNext`.

        Faults already pending for the method fire first.
        """
        self._apply(
            lambda conn, now: _add_fault(
                conn, FailNext(method=method, error=error, times=times, applied=applied)
            )
        )

    def inject_random(
        self,
        method: Method,
        probability: float,
        error: type[CloudError] = TransientCloudError,
        *,
        applied: bool = False,
    ) -> None:
        """Make calls of ``method`` fail with ``probability``; see :class:`FailRandomly`."""
        self._apply(
            lambda conn, now: _add_fault(
                conn,
                FailRandomly(method=method, probability=probability, error=error, applied=applied),
            )
        )

    def clear_faults(self) -> None:
        """Drop every pending injected fault. Quota, capacity limits and list lag stay."""
        self._apply(lambda conn, now: conn.execute("DELETE FROM faults"))

    def set_quota(self, quota: int | None) -> None:
        """Set the most non-terminated VMs the cloud holds; None for no limit."""
        if quota is not None and quota < 0:
            raise ValueError(f"quota must be >= 0, got {quota}")
        self._apply(lambda conn, now: _put_setting(conn, "quota", quota))

    def set_capacity(
        self,
        instance_type: str,
        limit: int | None,
        *,
        capacity_type: MarketType = "on-demand",
        zone: str | None = None,
    ) -> None:
        """Limit the non-terminated VMs of one instance type (``capacity_type`` spot: its
        spot VMs only, a spot stockout; in ``zone`` only, when given: a zone's stockout);
        None for no limit."""
        if limit is not None and limit < 0:
            raise ValueError(f"capacity limit must be >= 0, got {limit}")
        key = _capacity_key(instance_type, capacity_type)

        def op(conn: sqlite3.Connection, now: float) -> None:
            if zone is not None:
                conn.execute(
                    "DELETE FROM zone_capacity WHERE instance_type = ? AND zone = ?",
                    (instance_type, zone),
                )
                if limit is not None:
                    conn.execute(
                        "INSERT INTO zone_capacity VALUES (?, ?, ?)", (instance_type, zone, limit)
                    )
                return
            conn.execute("DELETE FROM capacity WHERE instance_type = ?", (key,))
            if limit is not None:
                conn.execute("INSERT INTO capacity VALUES (?, ?)", (key, limit))

        self._apply(op)

    # -- inspection -----------------------------------------------------------------------

    def calls(self) -> dict[str, int]:
        """How often each method was called, by any process, since the last reset."""
        with self._transaction() as conn:
            return _calls(conn)

    def reset_calls(self) -> None:
        self._apply(lambda conn, now: conn.execute("DELETE FROM calls"))

    def duplicates(self) -> int:
        """Non-terminated VMs beyond the first of each name: 0 unless a VM was duplicated."""
        with self._transaction() as conn:
            return _duplicates(conn)

    def snapshot(self) -> CloudSnapshot:
        with self._transaction() as conn:
            now = self._clock()
            rows = conn.execute(f"SELECT {_COLUMNS} FROM instances ORDER BY rowid").fetchall()
            (next_launch,) = conn.execute(
                "SELECT MIN(ready_at) FROM instances WHERE state = 'pending' AND ready_at > ?",
                (now,),
            ).fetchone()
            return CloudSnapshot(
                instances=tuple(_to_instance(row, now) for row in rows),
                calls=_calls(conn),
                duplicates=_duplicates(conn),
                next_launch_in=None if next_launch is None else next_launch - now,
            )

    # -- internals ------------------------------------------------------------------------

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on a fresh connection (cheap, and safe from any thread).

        A :class:`CloudError` is the call's answer, not a failed transaction: operations
        raise before writing, so committing keeps the call count and consumed faults.
        """
        conn = sqlite3.connect(self._path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            # In WAL mode, NORMAL still survives a SIGKILL (the crash we simulate); it only
            # skips the fsync per commit that guards against power loss.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except CloudError:
                conn.execute("COMMIT")
                raise
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        finally:
            conn.close()

    def _apply(self, op: _Op[_T]) -> _T:
        with self._transaction() as conn:
            return op(conn, self._clock())

    async def _call(self, method: Method, op: _Op[_T]) -> _T:
        return await asyncio.to_thread(self._call_sync, method, op)

    def _call_sync(self, method: Method, op: _Op[_T]) -> _T:
        with self._transaction() as conn:
            fired = _draw_fault(conn, method)
            if fired is not None and not fired.applied:
                raise fired.raise_for(method)
            result = op(conn, self._clock())
            if fired is not None:
                raise fired.raise_for(method)  # applied: the effect commits, the answer is lost
            return result

    def _create(self, conn: sqlite3.Connection, now: float, request: CreateRequest) -> Instance:
        check_request(request)
        row = conn.execute(
            f"SELECT {_COLUMNS} FROM instances WHERE token = ?", (request.idempotency_token,)
        ).fetchone()
        if row is not None:
            existing = _to_instance(row, now)
            sent = (
                request.name,
                request.instance_type,
                request.image,
                dict(request.tags),
                request.user_data,
                request.capacity_type,
                request.zone or existing.zone,
            )
            if sent != (
                existing.name,
                existing.instance_type,
                existing.image,
                existing.tags,
                existing.user_data,
                existing.capacity_type,
                existing.zone,
            ):
                raise IdempotencyMismatch(
                    f"idempotency token {request.idempotency_token!r} was used with other "
                    f"arguments for instance {existing.id}"
                )
            return existing
        if request.instance_type not in self._types:
            raise InvalidRequest(
                f"unknown instance type {request.instance_type!r}", reason="InvalidInstanceType"
            )
        zone = _zone_for(conn, request)
        quota = _get_setting(conn, "quota")
        live = _scalar(conn, "SELECT COUNT(*) FROM instances WHERE state != 'terminated'")
        if quota is not None and live >= quota:
            raise QuotaExceeded(f"instance quota of {quota} reached")
        limit = conn.execute(
            "SELECT max_live FROM capacity WHERE instance_type = ?", (request.instance_type,)
        ).fetchone()
        if limit is not None:
            of_type = _scalar(
                conn,
                "SELECT COUNT(*) FROM instances WHERE state != 'terminated' AND instance_type = ?",
                request.instance_type,
            )
            if of_type >= limit[0]:
                raise CapacityUnavailable(
                    f"no capacity for {request.instance_type}",
                    instance_type=request.instance_type,
                    capacity_type=request.capacity_type,
                )
        if request.capacity_type == "spot":
            spot = conn.execute(
                "SELECT max_live FROM capacity WHERE instance_type = ?",
                (_capacity_key(request.instance_type, "spot"),),
            ).fetchone()
            of_spot = _scalar(
                conn,
                "SELECT COUNT(*) FROM instances WHERE state != 'terminated' AND instance_type = ?"
                " AND capacity_type = 'spot'",
                request.instance_type,
            )
            if spot is not None and of_spot >= spot[0]:
                raise CapacityUnavailable(
                    f"no spot capacity for {request.instance_type}",
                    instance_type=request.instance_type,
                    capacity_type="spot",
                )
        _check_zone(conn, request.instance_type, zone)
        return self._insert(
            conn,
            now,
            name=request.name,
            instance_type=request.instance_type,
            image=request.image,
            tags=dict(request.tags),
            token=request.idempotency_token,
            user_data=request.user_data,
            capacity_type=request.capacity_type,
            zone=zone,
        )

    def _insert(
        self,
        conn: sqlite3.Connection,
        now: float,
        *,
        name: str,
        instance_type: str,
        image: str,
        tags: dict[str, str],
        token: str | None,
        user_data: str = "",
        capacity_type: MarketType = "on-demand",
        zone: str = "",
    ) -> Instance:
        instance_id = "i-" + secrets.token_hex(9)[:17]
        conn.execute(
            "INSERT INTO instances (id, name, instance_type, image, state, tags, token,"
            " created_at, ready_at, user_data, capacity_type, zone)"
            " VALUES (?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?)",
            (
                instance_id,
                name,
                instance_type,
                image,
                json.dumps(tags, sort_keys=True),
                token,
                now,
                now + self._boot_seconds,
                user_data,
                capacity_type,
                zone,
            ),
        )
        return _get(conn, now, instance_id)

    def _start(self, conn: sqlite3.Connection, now: float, instance_id: str) -> None:
        state = _get(conn, now, instance_id).state
        if state == "terminated":
            raise InvalidRequest(f"cannot start terminated instance {instance_id}")
        if state == "stopped":
            conn.execute(
                "UPDATE instances SET state = 'pending', ready_at = ? WHERE id = ?",
                (now + self._boot_seconds, instance_id),
            )


def _stop(conn: sqlite3.Connection, now: float, instance_id: str) -> None:
    inst = _get(conn, now, instance_id)
    if inst.state == "terminated":
        raise InvalidRequest(f"cannot stop terminated instance {instance_id}")
    if inst.state != "stopped":
        # ready_at keeps the last launch time; a VM stopped while booting never launched.
        conn.execute(
            "UPDATE instances SET state = 'stopped', ready_at = ? WHERE id = ?",
            (inst.launched_at, instance_id),
        )


def _get(conn: sqlite3.Connection, now: float, instance_id: str) -> Instance:
    row = conn.execute(f"SELECT {_COLUMNS} FROM instances WHERE id = ?", (instance_id,)).fetchone()
    if row is None:
        raise InstanceNotFound(f"instance {instance_id!r} not found", instance_id=instance_id)
    return _to_instance(row, now)


def _list(conn: sqlite3.Connection, now: float, tags: Mapping[str, str]) -> list[Instance]:
    lag = float(_get_setting(conn, "list_lag_seconds") or 0.0)
    sql = f"SELECT {_COLUMNS} FROM instances WHERE state != 'terminated'"
    params: tuple[float, ...] = ()
    if lag:
        sql, params = sql + " AND created_at <= ?", (now - lag,)
    rows = conn.execute(sql + " ORDER BY rowid", params).fetchall()
    found = (_to_instance(row, now) for row in rows)
    return [i for i in found if all(i.tags.get(k) == v for k, v in tags.items())]


def _to_instance(row: tuple[Any, ...], now: float) -> Instance:
    (
        instance_id,
        name,
        instance_type,
        image,
        stored,
        tags,
        created_at,
        ready_at,
        user_data,
        capacity_type,
        zone,
    ) = row
    launched = ready_at is not None and now >= ready_at
    state: InstanceState = "running" if stored == "pending" and launched else stored
    return Instance(
        id=instance_id,
        name=name,
        instance_type=instance_type,
        image=image,
        state=state,
        private_ip=_private_ip(instance_id),
        public_ip=_public_ip(instance_id) if state in ("pending", "running") else None,
        tags=json.loads(tags),
        created_at=created_at,
        launched_at=ready_at if launched else None,
        user_data=user_data,
        image_id=image,
        capacity_type="spot" if capacity_type == "spot" else "on-demand",
        zone=zone,
    )


def _capacity_key(instance_type: str, capacity_type: MarketType) -> str:
    """A capacity limit's key: the type (every VM of it), or ``type@spot`` (its spot VMs)."""
    return instance_type if capacity_type == "on-demand" else f"{instance_type}@{capacity_type}"


def _subnet_id(zone: str) -> str:
    """A zone's subnet id, shaped as EC2's (so a node class's subnetIds may name it)."""
    return "subnet-" + hashlib.sha256(f"sim:{zone}".encode()).hexdigest()[:17]


def _subnet_tags(zone: str) -> dict[str, str]:
    return {"Name": f"sim-{zone}", "topology.kubernetes.io/zone": zone}


def _selects(term: SelectorTerm, resource_id: str, tags: Mapping[str, str]) -> bool:
    """Whether ``term`` selects the resource, as EC2's filters would."""
    if term.id:
        return term.id == resource_id
    return bool(term.tags) and all(
        key in tags and (value == "*" or tags[key] == value) for key, value in term.tags
    )


def _zone_for(conn: sqlite3.Connection, request: CreateRequest) -> str:
    """The zone a new VM runs in: the one asked for (by zone, or by its subnet), or with
    none asked one of the cloud's zones by the token (as EC2 picks a default subnet)."""
    zones = _get_setting(conn, "zones") or []
    by_subnet = {_subnet_id(z): z for z in zones}
    asked = request.zone or next(
        (by_subnet[s] for s in request.launch.subnets if s in by_subnet), ""
    )
    if asked:
        if asked not in zones:
            raise InvalidRequest(
                f"zone {asked!r} is not one of the cloud's zones {zones}", reason="InvalidSubnet"
            )
        return str(asked)
    if not zones:
        return ""
    index = int(hashlib.sha256(request.idempotency_token.encode()).hexdigest(), 16) % len(zones)
    return str(zones[index])


def _check_zone(conn: sqlite3.Connection, instance_type: str, zone: str) -> None:
    """Refuse a VM its zone has no capacity or no address left for (after EC2's errors)."""
    if not zone:
        return
    in_zone = _scalar(
        conn, "SELECT COUNT(*) FROM instances WHERE state != 'terminated' AND zone = ?", zone
    )
    if in_zone >= int(_get_setting(conn, "subnet_addresses") or SUBNET_ADDRESSES):
        raise SubnetFull(
            f"InsufficientFreeAddressesInSubnet: no free address in {_subnet_id(zone)} ({zone})",
            subnet=_subnet_id(zone),
            zone=zone,
        )
    limit = conn.execute(
        "SELECT max_live FROM zone_capacity WHERE instance_type = ? AND zone = ?",
        (instance_type, zone),
    ).fetchone()
    if limit is None:
        return
    of_type = _scalar(
        conn,
        "SELECT COUNT(*) FROM instances WHERE state != 'terminated' AND instance_type = ?"
        " AND zone = ?",
        instance_type,
        zone,
    )
    if of_type >= limit[0]:
        raise CapacityUnavailable(
            f"no capacity for {instance_type} in the Availability Zone you requested ({zone})",
            instance_type=instance_type,
            zone=zone,
        )


def _private_ip(instance_id: str) -> str:
    h = hashlib.sha256(instance_id.encode()).digest()
    return f"10.{h[0]}.{h[1]}.{1 + h[2] % 254}"


def _public_ip(instance_id: str) -> str:
    # 203.0.113.0/24 is TEST-NET-3 (RFC 5737): nothing real answers there.
    h = hashlib.sha256(b"public:" + instance_id.encode()).digest()
    return f"203.0.113.{1 + h[0] % 254}"


def _draw_fault(conn: sqlite3.Connection, method: str) -> _Fired | None:
    """Count the call, then return the fault it triggers, if any, consuming it."""
    conn.execute(
        "INSERT INTO calls VALUES (?, 1) ON CONFLICT (method) DO UPDATE SET count = count + 1",
        (method,),
    )
    number = _scalar(conn, "SELECT count FROM calls WHERE method = ?", method)
    faults = conn.execute(
        "SELECT id, error, remaining, probability, applied FROM faults WHERE method = ?"
        " ORDER BY id",
        (method,),
    ).fetchall()
    seed = int(_get_setting(conn, "seed") or 0)
    for fault_id, error, remaining, probability, applied in faults:
        if remaining is not None:
            if remaining > 1:
                conn.execute(
                    "UPDATE faults SET remaining = ? WHERE id = ?", (remaining - 1, fault_id)
                )
            else:
                conn.execute("DELETE FROM faults WHERE id = ?", (fault_id,))
            return _Fired(_ERRORS[error], bool(applied))
        # A fresh RNG keyed by the call number: replayable anywhere, no RNG state to store.
        if random.Random(f"{seed}:{method}:{error}:{number}").random() < probability:
            return _Fired(_ERRORS[error], bool(applied))
    return None


def _add_fault(conn: sqlite3.Connection, fault: FailNext | FailRandomly) -> None:
    times, probability = (
        (fault.times, None) if isinstance(fault, FailNext) else (None, fault.probability)
    )
    conn.execute(
        "INSERT INTO faults (method, error, remaining, probability, applied)"
        " VALUES (?, ?, ?, ?, ?)",
        (fault.method, fault.error.__name__, times, probability, int(fault.applied)),
    )


def _install(conn: sqlite3.Connection, plan: FaultPlan) -> None:
    conn.execute("DELETE FROM faults")
    conn.execute("DELETE FROM capacity")
    conn.execute("DELETE FROM zone_capacity")
    faults: list[FailNext | FailRandomly] = [*plan.fail_next, *plan.fail_randomly]
    for fault in faults:
        _add_fault(conn, fault)
    for instance_type, limit in plan.capacity.items():
        conn.execute("INSERT INTO capacity VALUES (?, ?)", (instance_type, limit))
    _put_setting(conn, "seed", plan.seed)
    _put_setting(conn, "list_lag_seconds", plan.list_lag_seconds)


def _calls(conn: sqlite3.Connection) -> dict[str, int]:
    counted = dict(conn.execute("SELECT method, count FROM calls").fetchall())
    return {method: counted.get(method, 0) for method in METHODS}


def _duplicates(conn: sqlite3.Connection) -> int:
    return _scalar(
        conn,
        "SELECT COUNT(*) - COUNT(DISTINCT name) FROM instances WHERE state != 'terminated'",
    )


def _scalar(conn: sqlite3.Connection, sql: str, *params: object) -> int:
    value = conn.execute(sql, params).fetchone()[0]
    return int(value)


def _get_setting(conn: sqlite3.Connection, key: str) -> Any:
    row = conn.execute("SELECT value FROM settings WHERE key = ?", (key,)).fetchone()
    return None if row is None else json.loads(row[0])


def _put_setting(conn: sqlite3.Connection, key: str, value: object) -> None:
    conn.execute(
        "INSERT INTO settings VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, json.dumps(value)),
    )

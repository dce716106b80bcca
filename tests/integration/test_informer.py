"""Informers and the cache against the real kube-apiserver.

What the reflector promises: a 410 Gone relists and reports what vanished
meanwhile; a watch the server ends resumes without losing or repeating an
event; a silent watch is noticed and restarted; one informer per kind however
many controllers watch it; indexes follow the objects; managedFields are gone.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubeloop import (
    CONFIGMAPS,
    Added,
    Cache,
    Client,
    ControllerOptions,
    Deleted,
    Event,
    Informer,
    Object,
    ReflectorOptions,
    Request,
    Resource,
    Result,
    Updated,
)
from kubeloop._resource import ROLEBINDINGS, ROLES
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, resource_of, running, simple_crd

pytestmark = pytest.mark.integration

GROUP = "inf.kubeloop.dev"
THING_CRD = simple_crd(GROUP, "Thing", spec={"size": {"type": "integer", "minimum": 0}})
THINGS = resource_of(THING_CRD)

DEADLINE = 30.0


def thing(name: str, size: int = 1) -> Object:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Thing",
        "metadata": {"name": name},
        "spec": {"size": size},
    }


@pytest.fixture(scope="module")
def thing_crd(kube_control_plane: ControlPlane) -> None:
    kube_control_plane.install_crds([THING_CRD])


@pytest.fixture
def ns(kube_control_plane: ControlPlane, thing_crd: None) -> str:
    return kube_control_plane.create_namespace("inf")


class Requests:
    """A RequestObserver keeping ``(verb, resource, code)`` for every HTTP attempt."""

    def __init__(self) -> None:
        self.log: list[tuple[str, Resource | None, int]] = []

    def on_request(
        self,
        verb: str,
        resource: Resource | None,
        subresource: str | None,
        code: int,
        seconds: float,
    ) -> None:
        self.log.append((verb, resource, code))

    def count(self, verb: str, resource: Resource, code: int | None = None) -> int:
        return sum(
            1 for v, r, c in self.log if v == verb and r == resource and (code is None or c == code)
        )


def name_of(event: Event) -> str:
    return str(event.obj["metadata"]["name"])


def rv_of(event: Event) -> str:
    return str(event.obj["metadata"]["resourceVersion"])


@pytest.fixture
def requests() -> Requests:
    return Requests()


@pytest.fixture
async def observed_client(
    kube_control_plane: ControlPlane, requests: Requests
) -> AsyncIterator[Client]:
    """An admin client whose requests ``requests`` records."""
    async with Client.from_kubeconfig(kube_control_plane.kubeconfig, observer=requests) as c:
        yield c


# -- 410 Gone ----------------------------------------------------------------------------


async def test_relist_after_gone_reports_objects_deleted_during_the_gap(
    kube_control_plane: ControlPlane, kube_client: Client, ns: str
) -> None:
    # An identity that can list Things always, and watch them only while we allow it:
    # taking "watch" away opens a gap in which the informer sees nothing.
    user = f"watcher-{uuid.uuid4().hex[:6]}"
    rule = {"apiGroups": [GROUP], "resources": ["things"], "verbs": ["get", "list", "watch"]}
    await kube_client.create(
        ROLES,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "things-reader"},
            "rules": [rule],
        },
        ns,
    )
    await kube_client.create(
        ROLEBINDINGS,
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "things-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "things-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
        ns,
    )

    async def allow(verbs: list[str]) -> None:
        await kube_client.patch(ROLES, "things-reader", {"rules": [{**rule, "verbs": verbs}]}, ns)

    for name in ("a", "b", "c", "d"):
        await kube_client.create(THINGS, thing(name), ns)

    requests = Requests()
    async with Client.from_kubeconfig(
        kube_control_plane.kubeconfig_for(user), observer=requests
    ) as client:
        events: list[Event] = []
        inf = Informer(
            client,
            THINGS,
            namespace=ns,
            # the server ends each watch after a second; failed watches retry quickly
            options=ReflectorOptions(watch_timeout=(1, 1), backoff_initial=0.1, backoff_max=0.2),
        )
        inf.add_handler(events.append)
        inf.start()
        try:
            await inf.wait_synced()
            await eventually(lambda: requests.count("watch", THINGS, 200) >= 1, "a watch")
            assert sorted(inf.store.keys()) == [f"{ns}/{n}" for n in "abcd"]

            await allow(["get", "list"])
            await eventually(lambda: requests.count("watch", THINGS, 403) >= 1, "a refused watch")
            # the gap: nobody watching
            await kube_client.delete(THINGS, "c", ns)
            await kube_client.delete(THINGS, "d", ns)
            await kube_client.create(THINGS, thing("e"), ns)
            # and the version it would resume from is history: older than the watch
            # cache of this CRD (like a compaction while the informer was away)
            inf.reflector.resource_version = "1"
            during_gap = len(events)
            await allow(["get", "list", "watch"])

            await eventually(lambda: f"{ns}/e" in inf.store, "the informer to catch up")
        finally:
            await inf.stop()

    after = events[during_gap:]
    assert sorted((type(e).__name__, name_of(e)) for e in events[:during_gap]) == [
        ("Added", n) for n in "abcd"
    ]
    assert inf.reflector.relists == 1  # the 410 made it list again
    deleted = {name_of(e): e for e in after if isinstance(e, Deleted)}
    assert sorted(deleted) == ["c", "d"]
    assert all(e.final_state_unknown for e in deleted.values())
    assert [name_of(e) for e in after if isinstance(e, Added)] == ["e"]
    assert [e for e in after if isinstance(e, Updated)] == []
    assert sorted(inf.store.keys()) == [f"{ns}/{n}" for n in "abe"]


# -- the server ends watches; nothing is lost ------------------------------------------


async def test_watch_cut_by_the_server_resumes_without_losing_or_repeating_events(
    observed_client: Client, requests: Requests, ns: str
) -> None:
    client = observed_client
    seen: dict[str, list[str]] = defaultdict(list)
    inf = Informer(client, THINGS, namespace=ns, options=ReflectorOptions(watch_timeout=(1, 2)))
    inf.add_handler(lambda e: seen[name_of(e)].append(rv_of(e)))
    inf.start()
    try:
        await inf.wait_synced()
        names = [f"obj-{i}" for i in range(4)]
        written: dict[str, list[str]] = defaultdict(list)
        for name in names:
            created = await client.create(THINGS, thing(name), ns)
            written[name].append(created["metadata"]["resourceVersion"])
        watches_before = requests.count("watch", THINGS)
        step = 0
        # at least 200 updates, and keep writing until the server has ended the watch
        # (and the reflector reconnected) three times in the middle of them
        while step < 50 or requests.count("watch", THINGS) - watches_before < 3:
            step += 1
            for name in names:
                obj = await client.patch(THINGS, name, {"spec": {"size": step + 1}}, ns)
                written[name].append(obj["metadata"]["resourceVersion"])
            await asyncio.sleep(0.1)
            assert step < 1000, "the server never ended a watch"
        await eventually(
            lambda: all(seen[n][-1:] == written[n][-1:] for n in names),
            "the last version of every object",
        )
    finally:
        await inf.stop()
    assert sum(len(w) - 1 for w in written.values()) >= 200
    for name in names:
        # every version, once, in order: nothing lost at a reconnect, nothing replayed
        assert seen[name] == written[name], name
        stored = inf.store.get(f"{ns}/{name}")
        assert stored is not None
        assert stored["metadata"]["resourceVersion"] == written[name][-1]
        assert stored["spec"]["size"] == step + 1
    assert inf.reflector.relists == 0


# -- a silent watch is restarted -------------------------------------------------------


async def test_stalled_watch_is_detected_and_the_informer_keeps_working(
    kube_client: Client, ns: str
) -> None:
    events: list[Event] = []
    inf = Informer(kube_client, THINGS, namespace=ns, options=ReflectorOptions(read_timeout=0.5))
    inf.add_handler(events.append)
    inf.start()
    try:
        await inf.wait_synced()
        # nothing happens in this namespace: no line arrives within the read timeout
        await eventually(lambda: inf.reflector.stalls >= 1, "a stall to be detected")
        created = await kube_client.create(THINGS, thing("after-stall"), ns)
        await eventually(lambda: len(events) >= 1, "the write after the stall")
        await eventually(lambda: inf.reflector.stalls >= 2, "the restarted watch to stall again")
    finally:
        await inf.stop()
    # delivered once, from the resumed watch: no relist
    assert [(type(e), rv_of(e)) for e in events] == [
        (Added, created["metadata"]["resourceVersion"])
    ]
    assert inf.reflector.relists == 0


# -- one informer per kind ---------------------------------------------------------------


async def test_controllers_watching_one_kind_share_one_informer(
    observed_client: Client, requests: Requests, ns: str
) -> None:
    client = observed_client
    for name in ("x", "y"):
        await client.create(THINGS, thing(name), ns)
    mgr = new_manager(client)
    reconciled: dict[str, set[str]] = defaultdict(set)

    def reconciler(controller: str) -> Callable[[Request], Any]:
        async def reconcile(req: Request) -> Result:
            reconciled[controller].add(req.name)
            return Result()

        return reconcile

    for controller in ("first", "second"):
        mgr.controller(controller).for_(THINGS, namespace=ns).owns(CONFIGMAPS).with_options(
            ControllerOptions(max_concurrent_reconciles=2)
        ).complete(reconciler(controller))
    async with running(mgr):
        await eventually(
            lambda: reconciled["first"] == reconciled["second"] == {"x", "y"},
            "both controllers to reconcile both objects",
        )
        assert len(mgr.cache.informers) == 2  # Things and ConfigMaps, once each
        assert requests.count("list", THINGS) == 1
        # the LIST's objects can be reconciled before the WATCH that follows it is sent
        await eventually(lambda: requests.count("watch", THINGS) >= 1, "the Things watch")
        assert requests.count("watch", THINGS) == 1
        await client.create(THINGS, thing("z"), ns)
        await eventually(
            lambda: "z" in reconciled["first"] and "z" in reconciled["second"],
            "both controllers to see a new object",
        )


# -- indexes and transforms --------------------------------------------------------------


async def test_index_follows_objects_through_changes_and_deletes(
    kube_client: Client, ns: str
) -> None:
    for name, size in (("small-1", 1), ("small-2", 1), ("big", 9)):
        await kube_client.create(THINGS, thing(name, size), ns)
    cache = Cache(kube_client)
    inf = cache.informer(THINGS, namespace=ns)
    inf.add_index("size", lambda o: [str(o["spec"]["size"])])
    cache.start()
    try:
        await cache.wait_for_sync(DEADLINE)

        async def by_size(size: int) -> list[str]:
            objs = await cache.list(THINGS, ns, index=("size", str(size)))
            return sorted(o["metadata"]["name"] for o in objs)

        assert await by_size(1) == ["small-1", "small-2"]
        assert await by_size(9) == ["big"]
        assert await by_size(5) == []

        await kube_client.patch(THINGS, "small-2", {"spec": {"size": 9}}, ns)
        await kube_client.delete(THINGS, "big", ns)
        await eventually(lambda: f"{ns}/big" not in inf.store, "the delete to reach the cache")
        assert await by_size(1) == ["small-1"]
        assert await by_size(9) == ["small-2"]

        # an index added later covers what is already cached
        inf.add_index("name-length", lambda o: [str(len(o["metadata"]["name"]))])
        named = await cache.list(THINGS, ns, index=("name-length", "7"))
        assert sorted(o["metadata"]["name"] for o in named) == ["small-1", "small-2"]
    finally:
        await cache.stop()


@pytest.mark.parametrize("strip", [True, False])
async def test_managed_fields_are_stripped_by_default(
    kube_client: Client, ns: str, strip: bool
) -> None:
    live = await kube_client.create(THINGS, thing("managed"), ns)
    assert live["metadata"].get("managedFields")  # the server does send them
    cache = Cache(
        kube_client, options=ReflectorOptions() if strip else ReflectorOptions(transform=None)
    )
    cache.informer(THINGS, namespace=ns)
    cache.start()
    try:
        cached = await cache.get(THINGS, "managed", ns)
    finally:
        await cache.stop()
    assert cached is not None
    assert cached["metadata"]["uid"] == live["metadata"]["uid"]
    assert ("managedFields" in cached["metadata"]) is not strip

"""The finalizer helpers under write races, against the real apiserver.

A race (another writer between our read and our patch) is a conflict: the helpers
re-read and try again with the conflict backoff, and never turn it into a terminal
error (a 422 ``Invalid`` that would make a controller forget the object). Each test
checks the finalizer set the apiserver ends with.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import pytest

from kubeloop import (
    CONFIGMAPS,
    Client,
    Conflict,
    ErrorClass,
    Invalid,
    NotFound,
    Object,
    add_finalizer,
    classify,
    remove_finalizer,
)
from kubeloop.envtest import ControlPlane

pytestmark = pytest.mark.integration

T = TypeVar("T")

WRITERS = 4
ROUNDS = 15


def finalizer(i: int) -> str:
    return f"race.kubeloop.dev/writer-{i}"


@pytest.fixture
async def clients(kube_control_plane: ControlPlane) -> AsyncIterator[list[Client]]:
    """One client (one connection pool) per controller, as separate processes would have."""
    opened = [
        Client.from_kubeconfig(kube_control_plane.kubeconfig, field_manager=f"writer-{i}")
        for i in range(WRITERS)
    ]
    try:
        yield opened
    finally:
        for c in opened:
            await c.close()


async def live_finalizers(client: Client, name: str, ns: str) -> list[str]:
    obj = await client.get(CONFIGMAPS, name, ns)
    return list(obj["metadata"].get("finalizers") or [])


async def test_concurrent_add_and_remove_of_distinct_finalizers_each_end_right(
    clients: list[Client], kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube_client.create(
        CONFIGMAPS, {"metadata": {"name": "shared", "finalizers": ["keep.io/other"]}}, ns
    )

    requeues = 0

    async def as_a_workqueue_would(step: Callable[[], Awaitable[T]]) -> T:
        """A race that outlasts the helper's conflict backoff comes out as a Conflict,
        which a controller requeues; anything else (a terminal Invalid) fails the test."""
        nonlocal requeues
        while True:
            try:
                return await step()
            except Conflict:
                requeues += 1

    async def writer(i: int) -> list[tuple[str, bool]]:
        client, mine = clients[i], finalizer(i)
        seen: list[tuple[str, bool]] = []

        async def add() -> Object:
            obj = await client.get(CONFIGMAPS, "shared", ns)
            return await add_finalizer(client, CONFIGMAPS, obj, mine)

        async def remove() -> Object | None:
            obj = await client.get(CONFIGMAPS, "shared", ns)
            return await remove_finalizer(client, CONFIGMAPS, obj, mine)

        for _ in range(ROUNDS):
            added = await as_a_workqueue_would(add)
            seen.append(("add", mine in added["metadata"]["finalizers"]))
            left = await as_a_workqueue_would(remove)
            assert left is not None
            seen.append(("remove", mine not in (left["metadata"].get("finalizers") or [])))
        await as_a_workqueue_would(add)  # end with ours on: every last add must survive
        return seen

    results = await asyncio.gather(*(writer(i) for i in range(WRITERS)))
    for seen in results:
        assert seen == [("add", True), ("remove", True)] * ROUNDS
    final = await live_finalizers(kube_client, "shared", ns)
    assert sorted(final) == sorted(["keep.io/other", *(finalizer(i) for i in range(WRITERS))])
    assert len(final) == len(set(final))  # nobody added theirs twice
    # most races are absorbed inside the helpers: a requeue is the exception
    assert requeues < WRITERS * ROUNDS


async def test_concurrent_removers_never_leave_an_object_stuck_terminating(
    clients: list[Client], kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    for round_ in range(5):
        name = f"dying-{round_}"
        mine = [finalizer(i) for i in range(WRITERS)]
        await kube_client.create(CONFIGMAPS, {"metadata": {"name": name, "finalizers": mine}}, ns)
        await kube_client.delete(CONFIGMAPS, name, ns)
        terminating = await kube_client.get(CONFIGMAPS, name, ns)
        assert terminating["metadata"].get("deletionTimestamp")

        # every controller cleans up from the same read of the terminating object
        await asyncio.gather(
            *(
                remove_finalizer(clients[i], CONFIGMAPS, terminating, finalizer(i))
                for i in range(WRITERS)
            )
        )
        with pytest.raises(NotFound):  # all finalizers gone: the apiserver deleted it
            await kube_client.get(CONFIGMAPS, name, ns)


class _BumpBeforePatch:
    """Another writer changes the object between our read and each of our first
    ``times`` patches (a real update through the apiserver, so the resourceVersion our
    guarded patch tests is stale every time)."""

    def __init__(self, client: Client, other: Client, times: int) -> None:
        self.client, self.other, self.times = client, other, times
        self.patches = 0
        self._patch = client.patch

    async def __call__(self, res: Any, name: str, body: Any, namespace: Any, **kw: Any) -> Any:
        self.patches += 1
        if self.patches <= self.times:
            live = await self.other.get(res, name, namespace)
            live.setdefault("data", {})["bumped"] = str(self.patches)
            await self.other.update(res, live)
        return await self._patch(res, name, body, namespace, **kw)


async def raced(clients: list[Client], admin: Client, ns: str, name: str, times: int) -> Any:
    """A fresh object read by ``clients[0]``, whose next ``times`` patches each lose a
    race to ``clients[1]``; returns the (stale) object and the patch wrapper."""
    stale = await admin.create(CONFIGMAPS, {"metadata": {"name": name}}, ns)
    bump = _BumpBeforePatch(clients[0], clients[1], times=times)
    clients[0].patch = bump  # type: ignore[method-assign,assignment]
    return stale, bump


async def test_add_finalizer_outlasts_a_writer_that_changes_the_object_before_each_patch(
    clients: list[Client], kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    stale, bump = await raced(clients, kube_client, ns, "busy", times=3)
    added = await add_finalizer(clients[0], CONFIGMAPS, stale, finalizer(0))
    assert bump.patches == 4  # three lost races, each re-read, then the patch that held
    assert added["metadata"]["finalizers"] == [finalizer(0)]
    live = await kube_client.get(CONFIGMAPS, "busy", ns)
    assert live["metadata"]["finalizers"] == [finalizer(0)]
    assert live["data"] == {"bumped": "3"}  # the other writer's change survived


async def test_a_race_that_never_ends_is_a_conflict_to_requeue_not_a_terminal_error(
    clients: list[Client], kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    stale, bump = await raced(clients, kube_client, ns, "hot", times=1000)
    with pytest.raises(Conflict) as raised:
        await add_finalizer(clients[0], CONFIGMAPS, stale, finalizer(0))
    assert bump.patches == 5  # the conflict backoff's attempts, then it gives up
    assert classify(raised.value) is ErrorClass.CONFLICT
    assert not (await live_finalizers(kube_client, "hot", ns))


async def test_a_finalizer_the_apiserver_rejects_is_still_a_terminal_error(
    kube_client: Client, kube_namespace: str
) -> None:
    obj = await kube_client.create(CONFIGMAPS, {"metadata": {"name": "bad"}}, kube_namespace)
    with pytest.raises(Invalid) as raised:  # not a race: retrying cannot help
        await add_finalizer(kube_client, CONFIGMAPS, obj, "not a finalizer!")
    assert classify(raised.value) is ErrorClass.TERMINAL
    assert next(c.field for c in raised.value.causes) == "metadata.finalizers"

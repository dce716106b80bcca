"""The read guarantee of docs/architecture.md ("What a reconcile may assume after its own
writes"), checked on every read of random sequences of our own writes.

One writer (the operator's client, the only one touching the namespace) creates,
updates, patches (moving objects in and out of a label selector) and deletes ConfigMaps
from a small pool of names, and reads after each step from one of three informers of
the kind: the cluster-wide unselected one, a namespaced one with a label selector, and
a namespaced metadata-only one. Its watches lag at the fault proxy: each is delayed
when it (re)opens, and the sequence cuts them at random (they resume where they were). Since
nobody else writes, the guarantee means every read equals the model of our own writes:
the same names, each at exactly the resourceVersion our last write returned (and the
data it wrote), an object we deleted absent. The seed is printed; KUBELOOP_RYW_SEED
replays one run."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass

import pytest

from kubeloop import CONFIGMAPS, Client, Object
from kubeloop.testing import new_manager, running
from kubeloop.testing.faults import Delay, FaultProxy
from tests import factories
from tests.integration.ryw_support import selected_informer

pytestmark = pytest.mark.integration

SELECTOR = ("app", "x")
NAMES = ("a", "b", "c", "d")
SEQUENCES = 3
STEPS = 25


@dataclass
class Mine:
    """Our last write to one object: what every read must show."""

    rv: str
    uid: str
    v: str
    app: str


def _cm(name: str, v: str, app: str) -> Object:
    return factories.configmap(name, labels={"app": app}, data={"v": v})


def _seen(objs: list[Object], *, meta: bool) -> dict[str, tuple[str, str, str | None]]:
    return {
        o["metadata"]["name"]: (
            o["metadata"]["resourceVersion"],
            o["metadata"]["uid"],
            None if meta else (o.get("data") or {}).get("v"),
        )
        for o in objs
    }


def _expected(
    model: dict[str, Mine], *, selected: bool, meta: bool
) -> dict[str, tuple[str, str, str | None]]:
    return {
        n: (m.rv, m.uid, None if meta else m.v)
        for n, m in model.items()
        if not selected or m.app == SELECTOR[1]
    }


async def test_random_own_writes_are_read_back_from_every_informer(
    kube_fault_proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy, ns = kube_fault_proxy, kube_namespace
    seed = int(os.environ.get("KUBELOOP_RYW_SEED", time.time_ns() % 1_000_000))
    print(f"read-your-writes property: seed {seed} (KUBELOOP_RYW_SEED={seed} replays it)")
    rng = random.Random(seed)
    selector = f"{SELECTOR[0]}={SELECTOR[1]}"
    # lag: every (re)opened watch of the operator starts late and resumes from where it
    # was cut, so the informers fall behind our writes by different amounts. (Events are
    # not dropped: a watch that loses one breaks the watch contract the guarantee rests on.)
    proxy.add_rule(Delay(0.3), client="op", verb="watch")
    checked = 0
    async with Client(proxy.client_config("op")) as client:
        mgr = new_manager(client)
        mgr.cache.read_your_writes_timeout = 0.4
        async with running(mgr):
            await mgr.cache.list(CONFIGMAPS)  # cluster-wide, unselected
            await mgr.cache.list(CONFIGMAPS, ns, metadata_only=True)  # namespaced, metadata
            await selected_informer(mgr.cache, ns, selector)
            for seq in range(SEQUENCES):
                model: dict[str, Mine] = {}
                for step in range(STEPS):
                    name = rng.choice(NAMES)
                    op = rng.choice(("create", "update", "patch", "delete"))
                    v, app = str(rng.randrange(1000)), rng.choice(("x", "y"))
                    if name not in model:
                        op = "create"
                    elif op == "create":
                        op = "patch"
                    if op == "create":
                        out = await client.create(CONFIGMAPS, _cm(name, v, app), ns)
                    elif op == "update":
                        body = _cm(name, v, app)
                        body["metadata"]["namespace"] = ns
                        body["metadata"]["resourceVersion"] = model[name].rv
                        out = await client.update(CONFIGMAPS, body)
                    elif op == "patch":
                        patch = {"metadata": {"labels": {"app": app}}, "data": {"v": v}}
                        out = await client.patch(CONFIGMAPS, name, patch, ns)
                    else:
                        await client.delete(CONFIGMAPS, name, ns)
                        del model[name]
                    if op != "delete":
                        md = out["metadata"]
                        model[name] = Mine(md["resourceVersion"], md["uid"], v, app)
                    if rng.random() < 0.15:
                        proxy.cut_watches(client="op")
                    where = f"seed {seed}, sequence {seq}, step {step} ({op} {name})"
                    for _ in range(rng.randint(1, 2)):
                        checked += await _read_and_check(mgr, ns, selector, model, rng, where)
                for name in list(model):  # the next sequence starts from nothing
                    await client.delete(CONFIGMAPS, name, ns)
    assert checked >= SEQUENCES * STEPS


async def _read_and_check(
    mgr: object, ns: str, selector: str, model: dict[str, Mine], rng: random.Random, where: str
) -> int:
    from kubeloop import Manager

    assert isinstance(mgr, Manager)
    cache = mgr.cache
    kind = rng.choice(("wide", "selected", "meta"))
    selected, meta = kind == "selected", kind == "meta"
    label_selector = selector if selected else None
    want = _expected(model, selected=selected, meta=meta)
    if rng.random() < 0.5:
        objs = await cache.list(CONFIGMAPS, ns, label_selector=label_selector, metadata_only=meta)
        got = _seen(objs, meta=meta)
        assert got == want, f"list from the {kind} informer, {where}"
    else:
        name = rng.choice(NAMES)
        obj = await cache.get(
            CONFIGMAPS, name, ns, label_selector=label_selector, metadata_only=meta
        )
        got = _seen([obj] if obj else [], meta=meta)
        assert got == {k: w for k, w in want.items() if k == name}, (
            f"get {name} from the {kind} informer, {where}"
        )
    return 1

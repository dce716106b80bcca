"""The watch event of our own write, against the real apiserver: every version of an
object is summarized (its managedFields, for naming the other side of a 409) exactly
once, by whichever of the write's result and its watch event comes first; someone
else's write is summarized by the informer, and a deletion empties the log. Before the
echo was recognised, each of our writes was summarized twice."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import kubeloop._informer as informer_module
import kubeloop._writers as writers_module
from kubeloop import CONFIGMAPS, Client
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually, new_manager, running
from tests import factories

pytestmark = pytest.mark.integration

WRITES = 5


async def test_each_version_is_summarized_once_and_names_its_writer(
    kube_control_plane: ControlPlane, kube_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ns = kube_namespace
    summaries: Counter[str] = Counter()  # resourceVersion -> summaries made of it
    real = writers_module.writers_of

    def counting(obj: dict[str, Any]) -> Any:
        out = real(obj)
        if out is not None and obj.get("kind") == "ConfigMap":
            summaries[obj["metadata"]["resourceVersion"]] += 1
        return out

    monkeypatch.setattr(informer_module, "writers_of", counting)
    monkeypatch.setattr(writers_module, "writers_of", counting)
    cfg = kube_control_plane.kubeconfig
    async with (
        Client.from_kubeconfig(cfg, field_manager="me") as client,
        Client.from_kubeconfig(cfg, field_manager="other") as other,
    ):
        mgr = new_manager(client)
        async with running(mgr):
            await mgr.cache.list(CONFIGMAPS, ns)  # this namespace's informer
            inf = next(i for i in mgr.cache.informers if i.resource == CONFIGMAPS)
            obj = await client.create(CONFIGMAPS, factories.configmap("c", data={"v": "0"}), ns)
            versions = [obj["metadata"]["resourceVersion"]]
            await eventually(lambda: f"{ns}/c" in inf.store, "the informer has it")
            for i in range(1, WRITES + 1):
                obj = await client.update(CONFIGMAPS, {**obj, "data": {"v": str(i)}})
                versions.append(obj["metadata"]["resourceVersion"])
            theirs = await other.patch(CONFIGMAPS, "c", {"data": {"v": "theirs"}}, ns)
            versions.append(theirs["metadata"]["resourceVersion"])
            await eventually(
                lambda: inf.store.resource_version(f"{ns}/c") == versions[-1],
                "the informer has the last version",
            )
            uid = theirs["metadata"]["uid"]
            assert summaries == Counter(versions), "every version summarized exactly once"
            assert client.writers.holds(uid, versions[-1])
            named = client.writers.at(await mgr.cache.get(CONFIGMAPS, "c", ns) or {})
            assert named is not None
            assert "other" in {w.manager for w in named}, "their write, seen on the watch"
            await client.delete(CONFIGMAPS, "c", ns)
            await eventually(lambda: f"{ns}/c" not in inf.store, "the informer saw it go")
            assert not client.writers.holds(uid, versions[-1]), "forgotten on deletion"

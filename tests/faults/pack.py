"""A ReplicaSet-like operator reading its own writes back, for the fault matrix (issue 23,
bugs 3, 5 and 8).

A ``Pack`` (namespaced) asks for ``spec.replicas`` child ConfigMaps (``generateName``,
labelled with the Pack's name). Its reconcile counts the children **from the cache**
and creates the missing ones or deletes the extras, then asks to be reconciled again
shortly (a check of what it did), as a ReplicaSet controller does; which extras it deletes
is left to chance. Counting from the
cache is only safe if the cache shows the reconcile's own creates and deletes: a count
that misses a fresh child creates one too many, one that still shows a deleted child
deletes one too many (the over-delete client-go's expectations exist to prevent). The
matrix counts both from the apiserver's watch of the children.

The children are watched by two informers of one kind: a cluster-wide one with a label
selector (the one the count reads: it has the read's selector) and a namespaced one
without. The matrix's ``child-lag`` holds the cluster-wide one, so the namespaced one is
ahead of the informer the reconcile reads (expectations must settle per informer) and
the selector informer's read falls back to the server for what it has not seen (a fresh
child must be kept).

Each Pack also keeps one child of a fixed name, its *seal* (``<pack>-seal``): an
immutable ConfigMap recording the replicas the Pack was last sized for. Immutable, so a
change of ``spec.replicas`` replaces it: the reconcile deletes the old one and creates the
new one under the same name at once, the way a controller replaces an immutable child.
The seal is read from the cache (the namespaced informer: it has no Pack label), so a read
right after the replacement must show the new incarnation: the old one's delete, arriving
while the watch lags behind our create, must not settle the create (the matrix's
``recreate-lag``; a read that missed the create answers with a create the apiserver
refuses as ``AlreadyExists``, one that still showed the old seal with a second delete).

A Pack may name a Secret (``spec.secret``) that its reconcile reads from the cache; the
Secret is optional (only whether it exists goes to ``status.secretFound``). The
matrix's ``forbid-list`` refuses the operator's LIST of Secrets: such a read must fail
with a clear, retriable error (written to ``status.secretError``) instead of holding a
worker for ever, so the Packs that name no Secret are still reconciled meanwhile.

    python tests/faults/pack.py --kubeconfig K --label-selector run=x --identity op-1
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
from typing import Any

from kubeloop import (
    CONFIGMAPS,
    SECRETS,
    CacheReadError,
    Client,
    ControllerOptions,
    Manager,
    ManagerOptions,
    Object,
    Request,
    Result,
    configure_logging,
    load_kubeconfig,
    set_controller_reference,
    update_status,
)
from kubeloop._transport import HttpTransport
from kubeloop.testing import resource_of, simple_crd

GROUP = "faults.kubeloop.dev"
PACK_CRD = simple_crd(
    GROUP,
    "Pack",
    spec={"replicas": {"type": "integer", "minimum": 0}, "secret": {"type": "string"}},
    status={
        "observedGeneration": {"type": "integer"},
        "children": {"type": "integer"},
        "secretFound": {"type": "boolean"},
        "secretError": {"type": "string"},
    },
)
PACKS = resource_of(PACK_CRD)
#: The children's label: the Pack's name. The count reads through the informer that
#: selects on its presence.
PACK_LABEL = "faults.kubeloop.dev/pack"
#: The seal's label: the Pack's name (not :data:`PACK_LABEL`: the seal is no counted child).
SEAL_LABEL = "faults.kubeloop.dev/seal-of"
#: The Lease of a leader pair (in the Packs' namespace).
LEASE = "faults-pack-leader"
#: How soon a reconcile that created or deleted children checks again.
CHECK_S = 0.3


def seal_name(pack: str) -> str:
    return f"{pack}-seal"


def _pack_of_child(obj: Object) -> list[Request]:
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    pack = labels.get(PACK_LABEL) or labels.get(SEAL_LABEL)
    return [Request(pack, meta.get("namespace"))] if pack else []


class PackOperator:
    def __init__(self, mgr: Manager, selector: str, namespace: str) -> None:
        self.mgr, self.selector, self.namespace = mgr, selector, namespace

    def register(self) -> None:
        (
            self.mgr.controller("packs")
            .for_(PACKS, label_selector=self.selector)
            # two informers of ConfigMaps: cluster-wide by label (the one the count reads)
            # and the Packs' namespace unselected
            .watches(CONFIGMAPS, _pack_of_child, namespace=None, label_selector=PACK_LABEL)
            .watches(CONFIGMAPS, _pack_of_child, namespace=self.namespace)
            .with_options(ControllerOptions(max_concurrent_reconciles=2))
            .complete(self.reconcile)
        )

    async def reconcile(self, req: Request) -> Result:
        cache = self.mgr.cache
        pack = await cache.get(PACKS, req.name, req.namespace, label_selector=self.selector)
        if pack is None or pack["metadata"].get("deletionTimestamp"):
            return Result()
        spec = pack.get("spec") or {}
        found: bool | None = None
        if spec.get("secret"):
            try:
                found = await cache.get(SECRETS, spec["secret"], req.namespace) is not None
            except CacheReadError as err:
                message = str(err)

                def refused(status: dict[str, Any]) -> None:
                    status["secretError"] = message

                await update_status(self.mgr.client, PACKS, pack, refused)
                raise  # retriable: the workqueue's backoff brings it back
        # the count: this Pack's children as the selector informer holds them
        listed = await cache.list(CONFIGMAPS, req.namespace, label_selector=PACK_LABEL)
        children = [
            c
            for c in listed
            if c["metadata"]["labels"].get(PACK_LABEL) == req.name
            and not c["metadata"].get("deletionTimestamp")
        ]
        want = int(spec.get("replicas") or 0)
        for _ in range(want - len(children)):
            child: Object = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "generateName": f"{req.name}-",
                    "namespace": req.namespace,
                    "labels": {PACK_LABEL: req.name},
                },
            }
            set_controller_reference(pack, child)
            await self.mgr.client.create(CONFIGMAPS, child, req.namespace)
        # any extras will do (as a ReplicaSet ranks them by things a count does not
        # see): a count that still shows a child we deleted may pick a live one next
        random.shuffle(children)
        for extra in children[want:]:
            name = extra["metadata"]["name"]
            await self.mgr.client.delete(CONFIGMAPS, name, req.namespace, ignore_not_found=True)
        resealed = await self._seal(pack, want)
        generation = pack["metadata"]["generation"]

        def observed(status: dict[str, Any]) -> None:
            status["observedGeneration"] = generation
            status["children"] = want
            status.pop("secretError", None)
            if found is not None:
                status["secretFound"] = found

        await update_status(self.mgr.client, PACKS, pack, observed)
        acted = want != len(children) or resealed
        return Result(requeue_after=CHECK_S) if acted else Result()

    async def _seal(self, pack: Object, replicas: int) -> bool:
        """Keep the Pack's seal at ``replicas``, replacing it when it records another
        number; whether it wrote. A create refused as ``AlreadyExists`` raises (the
        workqueue retries): the cache missed our own create."""
        meta = pack["metadata"]
        name, ns = seal_name(meta["name"]), meta["namespace"]
        seal = await self.mgr.cache.get(CONFIGMAPS, name, ns)
        if seal is not None and (seal.get("data") or {}).get("replicas") == str(replicas):
            return False
        if seal is not None:
            # by name, as the read showed it: were that the new seal, it goes too
            await self.mgr.client.delete(CONFIGMAPS, name, ns, ignore_not_found=True)
        new: Object = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": ns, "labels": {SEAL_LABEL: meta["name"]}},
            "data": {"replicas": str(replicas)},
            "immutable": True,
        }
        set_controller_reference(pack, new)
        await self.mgr.client.create(CONFIGMAPS, new, ns)
        return True


async def run(args: argparse.Namespace) -> None:
    config = load_kubeconfig(args.kubeconfig)
    transport = HttpTransport(config, request_timeout=args.request_timeout)
    client = Client(config, field_manager="faults-pack", transport=transport)
    try:
        options = ManagerOptions(
            name="faults-pack",
            identity=args.identity,
            leader_election=args.leader_elect,
            leader_election_id=LEASE,
            leader_election_namespace=args.namespace,
            lease_duration=4.0,
            renew_deadline=3.0,
            retry_period=0.5,
            metrics_bind_address=None,
            health_probe_bind_address=None,
            handle_signals=True,
        )
        mgr = Manager(client, options)
        PackOperator(mgr, args.label_selector, args.namespace).register()
        await mgr.run()
    finally:
        await client.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--label-selector", required=True)
    p.add_argument("--identity", required=True)
    p.add_argument("--namespace", required=True, help="the Packs' namespace")
    p.add_argument("--request-timeout", type=float, default=60.0, help="seconds per API request")
    p.add_argument("--leader-elect", action="store_true", help="4 s leases (the matrix's)")
    configure_logging(os.environ.get("LOG_LEVEL", "INFO"), json_format=True)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()

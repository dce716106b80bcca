"""An operator that owns one child ConfigMap per custom resource (kopf's tutorial job).

An ``AppConfig`` (group ``examples.kubeloop.dev``) says which keys an application's
configuration holds; the operator keeps a ConfigMap of the same name, controlled by the
AppConfig through an ``ownerReference``, with exactly that data, and reports in the
AppConfig's status the generation it has acted on. Run it against a cluster, scoped to
one namespace::

    python examples/configmap_child/appconfig_operator.py --kubeconfig K --namespace A
    kubectl -n A apply -f - <<EOF
    apiVersion: examples.kubeloop.dev/v1
    kind: AppConfig
    metadata: {name: web}
    spec: {data: {greeting: hello}}
    EOF
    kubectl -n A get configmap web -o jsonpath='{.data}'     # {"greeting":"hello"}

It is written the way the README shows, nothing more: ``for_(APPCONFIGS, namespace=A)
.owns(CONFIGMAPS)``, reads from the cache, ``update_status`` with the generation the
reconcile processed. Two instances may run in different namespaces, and two replicas of
one with ``--leader-elect``. The fault matrix (``make faults``) runs it as a process.

(The file is not called ``operator.py``: run as a script, it would shadow the standard
library's ``operator`` module.)

Deleting an AppConfig deletes its ConfigMap here too (the reconcile does it, with a UID
precondition), so the example also works on a control plane without the garbage
collector of kube-controller-manager. With the collector, a child can vanish before the
owner's own cache hears of the deletion (two watches, two paces), so a create is confirmed
by a live read of the owner first.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import socket
from typing import Any

from kubeloop import (
    CONFIGMAPS,
    CRDS,
    AlreadyExists,
    Client,
    Conflict,
    ControllerOptions,
    KubeloopError,
    Manager,
    ManagerOptions,
    NotFound,
    Request,
    Result,
    configure_logging,
    generation_changed,
    set_condition,
    update_status,
)
from kubeloop.testing import resource_of, simple_crd

GROUP = "examples.kubeloop.dev"
KIND = "AppConfig"
APPCONFIG_CRD = simple_crd(
    GROUP,
    KIND,
    spec={
        "data": {
            "type": "object",
            "additionalProperties": {"type": "string"},
            "maxProperties": 64,
        }
    },
    status={
        "observedGeneration": {"type": "integer", "minimum": 0},
        "configMap": {"type": "string"},
        "keys": {"type": "integer", "minimum": 0},
        "conditions": {
            "type": "array",
            "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
)
APPCONFIGS = resource_of(APPCONFIG_CRD)
#: Children carry this label (the AppConfig's name), so they can be listed.
CHILD_LABEL = f"{GROUP}/appconfig"
FIELD_MANAGER = "appconfig-operator"

log = logging.getLogger("appconfig")


def child_of(app: dict[str, Any]) -> dict[str, Any]:
    """The ConfigMap ``app`` asks for."""
    meta = app["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "labels": {CHILD_LABEL: meta["name"]},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": KIND,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "data": dict((app.get("spec") or {}).get("data") or {}),
    }


def owner_uid(child: dict[str, Any]) -> str | None:
    """The UID of the AppConfig that controls ``child`` (None: not ours)."""
    for ref in child["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == KIND:
            return str(ref["uid"])
    return None


class AppConfigReconciler:
    """Keeps each AppConfig's ConfigMap equal to its spec, and says so in its status."""

    def __init__(self, mgr: Manager) -> None:
        self.mgr = mgr

    async def __call__(self, req: Request) -> Result:
        client, cache = self.mgr.client, self.mgr.cache
        app = await cache.get(APPCONFIGS, req.name, req.namespace)
        child = await cache.get(CONFIGMAPS, req.name, req.namespace)
        if app is None or app["metadata"].get("deletionTimestamp"):
            if child is not None and owner_uid(child) is not None:
                await self._delete_orphan(child)
            return Result()

        generation = app["metadata"]["generation"]
        desired = child_of(app)
        if child is None:
            if not await self._owner_is_live(app):
                # The AppConfig cache is behind the ConfigMap cache (its watch was
                # throttled, say) and the owner is gone: the child was collected with
                # it. Creating it again would leave an orphan for the garbage collector;
                # the owner's DELETED event is on its way and ends this.
                return Result()
            try:
                await client.create(CONFIGMAPS, desired)
            except AlreadyExists:
                return Result(requeue=True)  # our cache has not seen it yet
        elif owner_uid(child) != app["metadata"]["uid"]:
            # A ConfigMap of a previous AppConfig of this name (or someone else's): never
            # adopt it by name. Ours are deleted (precondition: that very object), then
            # the next reconcile creates the new one.
            if owner_uid(child) is None:
                raise KubeloopError(f"ConfigMap {req.namespace}/{req.name} is not ours")
            await self._delete_orphan(child)
            return Result(requeue=True)
        elif child.get("data") != desired["data"]:
            updated = {**child, "data": desired["data"]}
            try:
                await client.update(CONFIGMAPS, updated)
            except Conflict:
                return Result(requeue=True)  # changed meanwhile: read again, decide again

        keys = len(desired["data"])

        def mutate(status: dict[str, Any]) -> None:
            status["observedGeneration"] = generation  # the generation this run acted on
            status["configMap"] = req.name
            status["keys"] = keys
            set_condition(
                status.setdefault("conditions", []),
                "Ready",
                "True",
                "ConfigMapInSync",
                f"ConfigMap {req.name} holds {keys} keys",
                observed_generation=generation,
            )

        await update_status(client, APPCONFIGS, app, mutate)
        return Result()

    async def _live(self, name: str, namespace: str) -> dict[str, Any] | None:
        """The AppConfig as the API server has it now (None: gone), for the two decisions
        the cache may be behind on: creating a child and deleting one."""
        try:
            return await self.mgr.client.get(APPCONFIGS, name, namespace)
        except NotFound:
            return None

    async def _owner_is_live(self, app: dict[str, Any]) -> bool:
        """Whether ``app`` (from the cache) still exists. The two caches are fed by two
        watches, so a missing child may be one its owner's deletion took; creates are rare
        (once per AppConfig), so the quorum read costs little."""
        meta = app["metadata"]
        live = await self._live(meta["name"], meta["namespace"])
        return bool(
            live is not None
            and live["metadata"]["uid"] == meta["uid"]
            and not live["metadata"].get("deletionTimestamp")
        )

    async def _delete_orphan(self, child: dict[str, Any]) -> None:
        meta = child["metadata"]
        uid = owner_uid(child)
        live = await self._live(meta["name"], meta["namespace"])
        if live is not None and live["metadata"]["uid"] == uid:
            return  # its owner is still there: the cache was behind, nothing to delete
        with contextlib.suppress(NotFound, Conflict):
            await self.mgr.client.delete(
                CONFIGMAPS,
                meta["name"],
                meta["namespace"],
                preconditions={"uid": meta["uid"], "resourceVersion": meta["resourceVersion"]},
            )


def build_manager(client: Client, namespace: str, options: ManagerOptions) -> Manager:
    """The operator's manager: one controller, scoped to ``namespace``."""
    mgr = Manager(client, options)
    mgr.controller("appconfig").for_(
        APPCONFIGS, namespace=namespace, predicates=[generation_changed]
    ).owns(CONFIGMAPS).with_options(ControllerOptions(max_concurrent_reconciles=4)).complete(
        AppConfigReconciler(mgr)
    )
    return mgr


async def install_crd(client: Client, timeout: float = 60.0) -> None:
    """Create the AppConfig CRD if it is missing and wait until it is served."""
    with contextlib.suppress(AlreadyExists):
        await client.create(CRDS, APPCONFIG_CRD)
    async with asyncio.timeout(timeout):
        while True:
            crd = await client.get(CRDS, APPCONFIG_CRD["metadata"]["name"])
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                try:
                    await client.discover(f"{GROUP}/v1", KIND)
                    return
                except KubeloopError:
                    pass
            await asyncio.sleep(0.1)


def _address(value: str) -> str | None:
    return None if value in ("", "0", "none") else value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--namespace", required=True, help="the namespace this instance serves")
    parser.add_argument("--no-install-crd", action="store_true", help="the CRD is installed")
    parser.add_argument("--leader-elect", action="store_true", help="run as one of N replicas")
    parser.add_argument("--identity", default=f"{socket.gethostname()}_{os.getpid()}")
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-period", type=float, default=2.0)
    parser.add_argument(
        "--metrics-bind-address", default="0", help="host:port for /metrics ('0': off)"
    )
    parser.add_argument(
        "--health-probe-bind-address", default="0", help="host:port for /healthz ('0': off)"
    )
    return parser.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    async with Client.from_kubeconfig(args.kubeconfig, field_manager=FIELD_MANAGER) as client:
        if not args.no_install_crd:
            await install_crd(client)
        options = ManagerOptions(
            name="appconfig-operator",
            leader_election=args.leader_elect,
            leader_election_id=f"appconfig-operator-{args.namespace}",
            leader_election_namespace=args.namespace,
            identity=args.identity,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            metrics_bind_address=_address(args.metrics_bind_address),
            health_probe_bind_address=_address(args.health_probe_bind_address),
        )
        mgr = build_manager(client, args.namespace, options)
        log.info("serving AppConfigs in namespace %s as %s", args.namespace, args.identity)
        await mgr.run()


def main(argv: list[str] | None = None) -> None:
    configure_logging(os.environ.get("LOG_LEVEL", "INFO"), json_format=True)
    asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    main()

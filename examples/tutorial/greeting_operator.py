"""The tutorial's operator: every Greeting gets a ConfigMap with its message.

    python greeting_operator.py --namespace default   # $KUBECONFIG, or --kubeconfig K

It shows the whole shape of a kubeloop operator in one file: a reconciler that reads
from the cache, applies its child with server-side apply (owner reference included),
deletes it when the Greeting is switched off, and writes status only through the
status subresource and only when it changed.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from kubeloop import (
    CONFIGMAPS,
    CacheSyncTimeout,
    Client,
    ControllerOptions,
    Manager,
    ManagerOptions,
    Request,
    Resource,
    Result,
    apply_child,
    configure_logging,
    generation_changed,
    set_condition,
    update_status,
)

# The custom resource, as greeting_crd.yaml defines it.
GREETINGS = Resource("tutorial.kubeloop.dev", "v1", "greetings", "Greeting")
FIELD_MANAGER = "greeting-operator"


def build(client: Client, namespace: str, options: ManagerOptions) -> Manager:
    mgr = Manager(client, options)

    async def reconcile(req: Request) -> Result:
        # 1. Read from the informer cache: no API call, and never stale for our own writes.
        greeting = await mgr.cache.get(GREETINGS, req.name, req.namespace)
        if greeting is None:
            return Result()  # deleted: the garbage collector removes the ConfigMap
        generation = greeting["metadata"]["generation"]
        name = f"greeting-{req.name}"

        enabled = greeting["spec"].get("enabled", True)
        if enabled:
            # 2. The child, as we want it. Server-side apply sets only the fields we list,
            #    makes the Greeting its controller, and sends nothing new if nothing changed.
            child = {"metadata": {"name": name}, "data": {"message": greeting["spec"]["message"]}}
            await apply_child(mgr.client, CONFIGMAPS, child, greeting, field_manager=FIELD_MANAGER)
        else:
            # Switched off: the child goes. Absent is what we want, whoever deleted it.
            await mgr.client.delete(CONFIGMAPS, name, req.namespace, ignore_not_found=True)

        # 3. Status: only our change, through /status, skipped when it is already so.
        def mutate(status: dict[str, object]) -> None:
            status["observedGeneration"] = generation
            status["configMap"] = name if enabled else ""
            conditions = status.setdefault("conditions", [])
            assert isinstance(conditions, list)
            if enabled:
                message = f"ConfigMap {name} holds the message"
                set_condition(conditions, "Ready", "True", "ConfigMapApplied", message, generation)
            else:
                message = "spec.enabled is false"
                set_condition(conditions, "Ready", "False", "Disabled", message, generation)

        await update_status(mgr.client, GREETINGS, greeting, mutate)
        return Result()

    (
        mgr.controller("greeting")
        # generation_changed: our own status writes do not trigger another reconcile
        .for_(GREETINGS, namespace=namespace, predicates=[generation_changed])
        # a deleted or edited ConfigMap brings its Greeting back to the reconciler
        .owns(CONFIGMAPS)
        .with_options(ControllerOptions(max_concurrent_reconciles=4))
        .complete(reconcile)
    )
    return mgr


async def main(kubeconfig: str | None, namespace: str, probes: str | None) -> None:
    client = Client.from_kubeconfig(kubeconfig) if kubeconfig else Client.from_env()
    options = ManagerOptions(
        name="greeting-operator",
        metrics_bind_address=None,
        health_probe_bind_address=probes,
    )
    async with client:
        await build(client, namespace, options).run()  # until SIGTERM / SIGINT


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The kubeloop tutorial's Greeting operator")
    parser.add_argument("--kubeconfig", help="default: $KUBECONFIG, in-cluster, ~/.kube/config")
    parser.add_argument("--namespace", required=True, help="the namespace to watch")
    parser.add_argument("--health-probe-bind-address", default=None, help="e.g. 127.0.0.1:8081")
    args = parser.parse_args()
    configure_logging(logging.INFO)
    try:
        asyncio.run(main(args.kubeconfig, args.namespace, args.health_probe_bind_address))
    except CacheSyncTimeout as err:  # e.g. the CRD is not installed: the message says so
        sys.exit(f"error: {err}")

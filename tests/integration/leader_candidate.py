"""One leader-election candidate, run as its own OS process by test_leader_failover.py.

It runs a Manager with leader election and one controller that keeps writing
the ConfigMaps of a namespace: every reconcile bumps ``data.seq`` with an update
under the field manager ``<identity>``, so the apiserver's managedFields say
who wrote each version. On exit it prints one JSON line: how many LISTs of
ConfigMaps it sent before and after it became leader, and how it ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from kubeloop import (
    CONFIGMAPS,
    Client,
    ControllerOptions,
    LeaderElectionLost,
    Manager,
    ManagerOptions,
    Registry,
    Request,
    Resource,
    Result,
)
from kubeloop.testing import eventually


class Lists:
    """Counts this process's LISTs of ConfigMaps, split at the moment it became leader."""

    def __init__(self) -> None:
        self.leading = False
        self.before = 0
        self.after = 0

    def on_request(
        self, verb: str, resource: Resource | None, sub: str | None, code: int, s: float
    ) -> None:
        if verb == "list" and resource == CONFIGMAPS:
            if self.leading:
                self.after += 1
            else:
                self.before += 1


async def main(args: argparse.Namespace) -> int:
    lists = Lists()
    client = Client.from_kubeconfig(args.kubeconfig, field_manager=args.identity, observer=lists)
    mgr = Manager(
        client,
        ManagerOptions(
            name="failover",
            leader_election=True,
            leader_election_id=args.lease,
            leader_election_namespace=args.namespace,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
            identity=args.identity,
            metrics_bind_address=None,
            health_probe_bind_address=None,
            registry=Registry(),
        ),
    )

    async def reconcile(req: Request) -> Result:
        cm = await mgr.cache.get(CONFIGMAPS, req.name, req.namespace)
        if cm is None:
            return Result()
        data = dict(cm.get("data") or {})
        data["seq"] = str(int(data.get("seq", "0")) + 1)
        data["writer"] = args.identity
        await client.update(CONFIGMAPS, {**cm, "data": data})
        return Result(requeue_after=args.interval)

    mgr.controller("cms").for_(CONFIGMAPS, namespace=args.namespace).with_options(
        ControllerOptions(loop_detection=None)
    ).complete(reconcile)

    outcome = "stopped"
    code = 0
    runner = asyncio.create_task(mgr.run())

    async def note_leadership() -> None:
        # the manager creates its informers once run() has started: an empty list is not warm
        await eventually(
            lambda: bool(mgr.cache.informers) and all(i.has_synced for i in mgr.cache.informers),
            "warm caches",
            600,
        )
        print(json.dumps({"warm": args.identity}), flush=True)
        await eventually(lambda: mgr.elector is not None, "an elector", 600)
        assert mgr.elector is not None
        await mgr.elector.became_leader.wait()
        lists.leading = True
        print(json.dumps({"leading": args.identity}), flush=True)

    watcher = asyncio.create_task(note_leadership())
    try:
        await runner
    except LeaderElectionLost as err:
        outcome, code = f"lost: {err}", 3
    finally:
        watcher.cancel()
        await client.close()
    print(
        json.dumps(
            {
                "identity": args.identity,
                "outcome": outcome,
                "lists_before_leading": lists.before,
                "lists_after_leading": lists.after,
                "fence_refused": mgr._fence.refused if mgr._fence else 0,
            }
        ),
        flush=True,
    )
    return code


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--lease", required=True)
    parser.add_argument("--lease-duration", type=float, default=3.0)
    parser.add_argument("--renew-deadline", type=float, default=2.0)
    parser.add_argument("--retry-period", type=float, default=0.5)
    parser.add_argument("--interval", type=float, default=0.05)
    sys.exit(asyncio.run(main(parser.parse_args())))

"""Two leader-election candidates in separate OS processes; the leader is frozen or
partitioned.

SIGSTOP is a real fault: the process keeps its lease record, its open
connections and its in-flight reconciles, and thaws with every timer overdue,
as after a VM pause, a long GC stop or a partition that heals. The standby must
take the lease, and the old leader must stop without writing once more.

The oracle is the apiserver: a watch (from the test, not from either candidate)
records every version of the written ConfigMaps with the field manager that
wrote it, read from ``managedFields``. In resourceVersion order, no version
written by the old leader may follow the first one written by the new leader.

The partition goes through :class:`kubeloop.testing.faults.FaultProxy`: every
request of the leader hangs (a blackhole), so its renewals hang too. A round that
cannot finish within the renew deadline is cancelled, and the leader gives up
while still cut off, without waiting for the network to come back. The proxy's
log (etcd revisions of every accepted write, per client) is the second oracle.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kubeloop import CONFIGMAPS, LEASES, Client, NotFound, Object
from kubeloop._loopdetect import field_owner
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually
from kubeloop.testing.faults import FaultProxy

pytestmark = pytest.mark.integration

SCRIPT = Path(__file__).with_name("leader_candidate.py")
LEASE = "failover-lease"
DEADLINE = 60.0


class Candidate:
    """One candidate process and the JSON lines it printed."""

    def __init__(self, identity: str, proc: asyncio.subprocess.Process) -> None:
        self.identity = identity
        self.proc = proc
        self.lines: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        async for raw in self.proc.stdout:
            with contextlib.suppress(ValueError):
                self.lines.append(json.loads(raw))

    def said(self, key: str) -> bool:
        return any(key in line for line in self.lines)

    async def wait(self) -> tuple[int, dict[str, Any]]:
        rc = await asyncio.wait_for(self.proc.wait(), DEADLINE)
        await asyncio.wait_for(self._reader, DEADLINE)
        final: dict[str, Any] = next(
            (line for line in reversed(self.lines) if "outcome" in line), {}
        )
        return rc, final

    def kill(self) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGCONT)
                self.proc.kill()


async def spawn(
    cp: ControlPlane, identity: str, ns: str, log_dir: Path, kubeconfig: Path | None = None
) -> Candidate:
    stderr = (log_dir / f"candidate-{identity}.log").open("wb")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        "--kubeconfig",
        str(kubeconfig or cp.kubeconfig),
        "--identity",
        identity,
        "--namespace",
        ns,
        "--lease",
        LEASE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )
    stderr.close()
    return Candidate(identity, proc)


class Versions:
    """Every version of the namespace's ConfigMaps the apiserver reports, in order."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, str, str]] = []  # (resourceVersion, name, manager)

    def writers(self) -> list[str]:
        return [m for _, _, m in sorted(self.writes)]

    async def follow(self, client: Client, ns: str, rv: str) -> None:
        async for event in client.watch(CONFIGMAPS, ns, resource_version=rv):
            obj: Object = event.object
            if event.type != "MODIFIED":
                continue
            meta = obj["metadata"]
            owner = field_owner(meta.get("managedFields") or [], "data.seq") or "?"
            self.writes.append((int(meta["resourceVersion"]), meta["name"], owner))


async def make_configmaps(client: Client, ns: str) -> str:
    """Three ConfigMaps for the candidates to write; returns the version to watch from."""
    for i in range(3):
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}}
        await client.create(CONFIGMAPS, {**body, "data": {"seq": "0"}}, ns)
    _, rv = await client.list_all(CONFIGMAPS, ns)
    return rv


def assert_no_overlap(writers: list[str]) -> None:
    writers = [w for w in writers if w in ("a-cms", "b-cms")]
    first_b = writers.index("b-cms")
    assert writers[:first_b].count("a-cms") >= 1
    assert "a-cms" not in writers[first_b:], "the old leader wrote after the new one"


async def holder(client: Client, ns: str) -> str:
    try:
        lease = await client.get(LEASES, LEASE, ns)
    except NotFound:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def test_a_frozen_leader_stops_without_writing_after_the_new_leader(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    rv = await make_configmaps(kube_client, ns)
    versions = Versions()
    follower = asyncio.create_task(versions.follow(kube_client, ns, rv))
    a = await spawn(kube_control_plane, "a", ns, tmp_path)
    b: Candidate | None = None
    try:
        await eventually(lambda: "a-cms" in versions.writers(), "a to lead and write", DEADLINE)
        b = await spawn(kube_control_plane, "b", ns, tmp_path)
        await eventually(lambda: b is not None and b.said("warm"), "b's caches to sync", DEADLINE)
        assert await holder(kube_client, ns) == "a"

        os.kill(a.proc.pid, signal.SIGSTOP)

        async def b_holds() -> bool:
            return await holder(kube_client, ns) == "b"

        await eventually(b_holds, "b to take the lease", DEADLINE, interval=0.2)
        await eventually(
            lambda: "b-cms" in versions.writers(), "b to take over and write", DEADLINE
        )
        os.kill(a.proc.pid, signal.SIGCONT)
        rc_a, final_a = await a.wait()

        # a marker written after a exited: once the watch shows it, it showed all before
        marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "marker"}}
        await kube_client.create(CONFIGMAPS, marker, ns)
        await kube_client.patch(CONFIGMAPS, "marker", {"data": {"seq": "1"}}, ns)
        await eventually(
            lambda: any(name == "marker" for _, name, _ in versions.writes),
            "the watch to catch up",
            DEADLINE,
        )
        assert b.proc.returncode is None  # b still leads
        b.proc.send_signal(signal.SIGTERM)
        rc_b, final_b = await b.wait()
    finally:
        follower.cancel()
        for c in (a, b):
            if c is not None:
                c.kill()
    assert_no_overlap(versions.writers())
    # the old leader noticed and exited with an error instead of shutting down gracefully
    assert rc_a == 3, (rc_a, final_a)
    assert final_a["outcome"].startswith("lost: leader lease lost")
    # the standby's cache was warm: becoming leader cost it no LIST
    assert rc_b == 0, (rc_b, final_b)
    assert final_b["lists_before_leading"] >= 1
    assert final_b["lists_after_leading"] == 0


async def test_a_partitioned_leader_gives_up_while_cut_off_and_never_overlaps(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str, tmp_path: Path
) -> None:
    ns = kube_namespace
    rv = await make_configmaps(kube_client, ns)
    versions = Versions()
    follower = asyncio.create_task(versions.follow(kube_client, ns, rv))
    a: Candidate | None = None
    b: Candidate | None = None
    try:
        async with FaultProxy(kube_control_plane) as proxy:
            a = await spawn(kube_control_plane, "a", ns, tmp_path, proxy.kubeconfig_for("a"))
            await eventually(lambda: "a-cms" in versions.writers(), "a to lead", DEADLINE)
            b = await spawn(kube_control_plane, "b", ns, tmp_path, proxy.kubeconfig_for("b"))
            await eventually(lambda: b is not None and b.said("warm"), "b to sync", DEADLINE)

            cut_at = time.monotonic()  # the proxy logs on this clock too (same process)
            cut = proxy.partition("a")  # every request of a hangs from now on
            # a gives up on its own, still cut off: its hung renewals hit the deadline
            rc_a, final_a = await a.wait()
            assert proxy.rules == [cut]  # the partition was still in force
            await eventually(lambda: "b-cms" in versions.writers(), "b to take over", DEADLINE)
            proxy.heal(cut)

            marker = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "marker"}}
            await kube_client.create(CONFIGMAPS, marker, ns)
            await kube_client.patch(CONFIGMAPS, "marker", {"data": {"seq": "1"}}, ns)
            await eventually(
                lambda: any(name == "marker" for _, name, _ in versions.writes),
                "the watch to catch up",
                DEADLINE,
            )
            b.proc.send_signal(signal.SIGTERM)
            rc_b, final_b = await b.wait()
            last_a = proxy.log.last_write("a", resource="configmaps")
            first_b = proxy.log.first_write("b", resource="configmaps")
            b_lists = proxy.log.entries(client="b", verb="list", resource="configmaps")
            hung_a = [
                e
                for e in proxy.log.writes(client="a", resource="configmaps", ok=False)
                if e.action == "partition"
            ]
    finally:
        follower.cancel()
        for c in (a, b):
            if c is not None:
                c.kill()
    assert_no_overlap(versions.writers())
    # the proxy's log says the same: a's last accepted write precedes b's first in etcd
    assert last_a is not None
    assert first_b is not None
    assert last_a.revision is not None
    assert first_b.revision is not None
    assert last_a.revision < first_b.revision
    # whatever a sent into the partition never reached the apiserver
    assert all(e.status == 0 for e in hung_a)
    assert rc_a == 3, (rc_a, final_a)
    assert final_a["outcome"].startswith("lost: leader lease lost")
    assert rc_b == 0, (rc_b, final_b)
    assert final_b["lists_after_leading"] == 0
    # and by the proxy's log: b listed ConfigMaps once, as a standby (before a was cut off,
    # so before b could lead), and never again after taking over
    assert len(b_lists) == 1
    assert b_lists[0].started < cut_at

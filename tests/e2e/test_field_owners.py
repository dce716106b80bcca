"""docs/architecture.md's table of who writes which field, held against what the operator
really writes.

One short scenario on the real apiserver, the three controllers in-process: an Instance
launched, two pods that raise a pool (reserving its new nodes) from 0 to 1 node, then
deleted so that scale-down empties it again. Raw watches (``managedFields`` kept) of every
object of the operator's kinds, the pods and the pool's Nodes collect each field manager's
fields, two levels deep (``spec.targetNodes``, ``metadata.finalizers``). The operator's
managers (its client's name, ``-<controller>`` inside a reconcile) must own exactly the
fields the table lists for this scenario; a row the scenario does not reach names the test
that shows it instead.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from kubeloop import NODES, PODS, Client, Event, Informer, ReflectorOptions, Resource
from kubeloop.envtest import ControlPlane
from nodepool_operator.api import AUTOSCALERS, INSTANCES, NODEPOOLS
from nodepool_operator.controllers import POOL_LABEL
from nodepool_operator.operator import CONTROLLERS, FIELD_MANAGER
from tests import factories
from tests.e2e.conftest import OperatorEnv

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
#: The table's heading in the doc; its rows are ``| kind | field | field manager | ... |``.
HEADING = "### Who writes which field"
#: What a row's "shown by" cell says when this test's scenario is what shows it.
HERE = "tests/e2e/test_field_owners.py"
#: Who creates the scenario's objects: not the operator, so not in the table.
AUTHOR = "e2e-author"

Owned = set[tuple[str, str, str]]


def table() -> tuple[Owned, Owned]:
    """The doc's rows as (kind, field, manager): every row, and those this test shows."""
    text = DOC.read_text()
    start = text.index(HEADING)
    rows: Owned = set()
    here: Owned = set()
    for line in text[start:].splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] in ("kind", "") or set(cells[0]) <= {"-", " "}:
            continue
        kind, field, manager, shown = cells[0], cells[1], cells[2], cells[-1]
        row = (kind, field, manager.replace("<client>", FIELD_MANAGER))
        rows.add(row)
        if HERE in shown:
            here.add(row)
    return rows, here


def fields(tree: Mapping[str, Any], depth: int = 2, prefix: str = "") -> Iterator[str]:
    """The dotted paths of a ``fieldsV1`` tree, ``depth`` levels deep (``.`` is the
    parent itself; ``k:`` and ``v:`` items stop the walk at their list)."""
    for key, sub in tree.items():
        if not key.startswith("f:"):
            continue
        path = f"{prefix}{key[2:]}"
        if depth == 1 or not isinstance(sub, Mapping) or not any(k.startswith("f:") for k in sub):
            yield path
        else:
            yield from fields(sub, depth - 1, path + ".")


class Owners:
    """Every (kind, field, manager) seen in a managedFields entry of the watched objects."""

    def __init__(self) -> None:
        self.seen: Owned = set()
        self.informers: list[Informer] = []

    def handler(self, kind: str) -> Callable[[Event], None]:
        def note(event: Event) -> None:
            for entry in event.obj.get("metadata", {}).get("managedFields") or ():
                for path in fields(entry.get("fieldsV1") or {}):
                    self.seen.add((kind, path, entry.get("manager", "")))

        return note

    async def watch(
        self,
        client: Client,
        res: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> None:
        raw = ReflectorOptions(transform=None)  # keep managedFields
        informer = Informer(
            client,
            res,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            options=raw,
        )
        informer.add_handler(self.handler(res.kind))
        informer.start()
        self.informers.append(informer)
        await informer.wait_synced()

    def ours(self) -> Owned:
        """The operator's entries: its client's manager, with or without a controller."""
        # the Autoscaler's second controller writes back dropped nominations (_renominate),
        # its third lifts gates with no nomination behind them (_gates)
        names = (*CONTROLLERS, "autoscaler-nominations", "autoscaler-gates")
        mine = re.compile(rf"{re.escape(FIELD_MANAGER)}(-({'|'.join(names)}))?")
        return {s for s in self.seen if mine.fullmatch(s[2])}

    async def stop(self) -> None:
        await asyncio.gather(*(i.stop() for i in self.informers))


@pytest.fixture
async def author(kube_control_plane: ControlPlane) -> Any:
    async with Client.from_kubeconfig(
        kube_control_plane.kubeconfig, field_manager=AUTHOR
    ) as client:
        yield client


async def test_the_operator_writes_the_fields_the_architecture_table_lists(
    operator_env: OperatorEnv, kube_namespace: str, author: Client
) -> None:
    env, ns = operator_env, kube_namespace
    assert env.client.field_manager == FIELD_MANAGER  # the operator's managers as in production

    async def create(res: Resource, obj: dict[str, Any], namespace: str | None = None) -> None:
        """As ``env.create``, by the scenario's author: its fields are not the operator's."""
        created = await author.create(res, env.labelled(obj), namespace)
        env.created.append((res, created["metadata"]["name"], namespace))

    pool, scaler = f"pool-{env.run_id}", f"as-{env.run_id}"
    owners = Owners()
    await owners.watch(author, NODEPOOLS, field_selector=f"metadata.name={pool}")
    await owners.watch(author, AUTOSCALERS, field_selector=f"metadata.name={scaler}")
    await owners.watch(author, INSTANCES, namespace=ns)
    await owners.watch(author, PODS, namespace=ns)
    await owners.watch(author, NODES, label_selector=f"{POOL_LABEL}={pool}")
    try:
        await create(
            NODEPOOLS,
            factories.nodepool(
                pool,
                target=0,
                instance_type="mem96.large",
                max_nodes=3,
                cpu="64",
                memory="96Gi",
                reserveNewNodes=True,  # the pods planned for the new node are granted it
            ),
        )
        await create(
            AUTOSCALERS,
            factories.autoscaler(
                scaler,
                pool=pool,
                namespaces=[ns],
                frequency="1s",
                scaleDownEnabled=True,
                scaleDownUnneededTime="1s",
            ),
        )
        await create(INSTANCES, factories.instance("vm", namespace=ns), ns)
        await env.start(controllers=CONTROLLERS)
        app = factories.container("app", cpu="100m", memory="28Gi")
        for i in range(2):  # one 96Gi node
            pod = factories.pod(
                f"p{i}", node_selector={POOL_LABEL: pool}, containers=[app], grace=0
            )
            await create(PODS, pod, ns)

        async def scheduled() -> bool:
            pods = (await author.list(PODS, ns))["items"]
            return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

        await env.eventually(scheduled, "2 pods on the pool's node", timeout=90)

        async def running() -> bool:
            status = (await author.get(INSTANCES, "vm", ns)).get("status", {})
            return bool(status.get("state") == "running")

        await env.eventually(running, "the Instance's VM running")
        for i in range(2):
            await author.delete(PODS, f"p{i}", ns)

        async def emptied() -> bool:
            target = (await author.get(NODEPOOLS, pool))["spec"].get("targetNodes")
            nodes = (await author.list(NODES, label_selector=f"{POOL_LABEL}={pool}"))["items"]
            return target == 0 and not nodes

        await env.eventually(emptied, "scale-down to 0 nodes", timeout=90)
        status = (await author.get(NODEPOOLS, pool)).get("status", {})
        assert not status.get("instances")
    finally:
        await owners.stop()
    rows, here = table()
    ours = owners.ours()
    assert here, f"no row of {HEADING!r} in {DOC} names {HERE}"
    assert ours - rows == set(), "written by the operator, missing from the table"
    assert here - ours == set(), "in the table for this scenario, not written in it"

"""The Actor's name patches on Nodes (:mod:`nodepool_operator.controllers._unneeded`): guarded
JSON patches built from the cache's read; when the Node's taints changed since (the server
refuses the test, 422), built again from a fresh read, losing nothing another writer put
there. The server's JSON-patch semantics are played by ``jsonpatch``; the real apiserver's are
in ``tests/e2e/test_drain.py``."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from kubeloop import Conflict, Invalid, Object
from nodepool_operator.controllers._node_fields import node_fields
from nodepool_operator.controllers._unneeded import CANDIDATE_TAINT, UNNEEDED_ANNOTATION
from nodepool_operator.controllers.autoscaler.act import Actor
from nodepool_operator.controllers.autoscaler.decide import Mark
from tests import factories

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}
SOFT = {"key": CANDIDATE_TAINT.key, "effect": "PreferNoSchedule"}


class NodeServer:
    """One Node, patched as the apiserver does (a failed ``test`` is a 422); ``meanwhile``
    changes it before each of the first patches, as another writer would."""

    def __init__(self, node: Object, meanwhile: int = 0) -> None:
        self.node = node
        self.meanwhile = meanwhile
        self.patches = self.gets = 0

    async def patch(self, resource: Any, name: str, ops: Any, **kwargs: Any) -> Object:
        self.patches += 1
        if self.meanwhile:
            self.meanwhile -= 1
            self.node["spec"].setdefault("taints", []).insert(0, dict(NOT_READY))
        try:
            self.node = jsonpatch.apply_patch(self.node, _null_is_missing(self.node, ops))
        except jsonpatch.JsonPatchTestFailed as err:
            raise Invalid(422, "Invalid", str(err)) from err
        return copy.deepcopy(self.node)

    async def get(self, resource: Any, name: str, *args: Any, **kwargs: Any) -> Object:
        self.gets += 1
        return copy.deepcopy(self.node)


def _null_is_missing(node: Object, ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """kube-apiserver's JSON patch passes a ``test`` of null on a missing path (jsonpatch
    does not): such tests are checked here and left out."""
    kept = []
    for op in ops:
        if op["op"] == "test" and op["value"] is None:
            try:
                found = jsonpatch.JsonPointer(op["path"]).resolve(node)
            except jsonpatch.JsonPointerException:
                continue
            raise jsonpatch.JsonPatchTestFailed(f"{op['path']} is {found!r}, not null")
        kept.append(op)
    return kept


class Quiet:
    def normal(self, *args: Any, **kwargs: Any) -> None: ...

    def warning(self, *args: Any, **kwargs: Any) -> None: ...


def _named() -> Object:
    return factories.node("n-0", taints=[dict(NOT_READY)])


async def test_a_name_and_its_soft_taint_go_on_beside_the_others() -> None:
    server = NodeServer(_named())
    read = copy.deepcopy(server.node)
    await Actor(server, Quiet()).mark([Mark("n-0", True, 0.0, node_fields(read))])  # type: ignore[arg-type]
    assert server.node["spec"]["taints"] == [NOT_READY, SOFT]
    assert server.node["metadata"]["annotations"][UNNEEDED_ANNOTATION] == "1970-01-01T00:00:00Z"
    await Actor(server, Quiet()).mark([Mark("n-0", False, 0.0, node_fields(server.node))])  # type: ignore[arg-type]
    assert server.node["spec"]["taints"] == [NOT_READY]
    assert UNNEEDED_ANNOTATION not in server.node["metadata"]["annotations"]


async def test_a_taint_list_that_shifted_is_read_again_and_nothing_is_lost() -> None:
    server = NodeServer(_named())
    named = copy.deepcopy(server.node)
    named["metadata"].setdefault("annotations", {})[UNNEEDED_ANNOTATION] = "x"
    named["spec"]["taints"].append(dict(SOFT))
    server.node = copy.deepcopy(named)
    server.meanwhile = 1  # a taint put first: the soft one is no longer where it was read
    await Actor(server, Quiet()).mark([Mark("n-0", False, 0.0, node_fields(named))])  # type: ignore[arg-type]
    assert (server.patches, server.gets) == (2, 1)
    assert server.node["spec"]["taints"] == [NOT_READY, NOT_READY]  # the other writer's kept


async def test_a_node_that_keeps_changing_hands_the_pass_to_the_workqueue() -> None:
    server = NodeServer(_named(), meanwhile=99)
    named = copy.deepcopy(server.node)
    named["spec"]["taints"].append(dict(SOFT))
    server.node = copy.deepcopy(named)
    with pytest.raises(Conflict):
        await Actor(server, Quiet()).mark([Mark("n-0", False, 0.0, node_fields(named))])  # type: ignore[arg-type]
    assert server.patches == 3

"""The Pod and Node indexes the NodePool and Autoscaler controllers share: built on one manager,
the two controllers file each pod under its node once and each Node under its pool once."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubeloop import NODES, PODS, Informer
from kubeloop.testing import Snapshot
from nodepool_operator.cloud import SimulatedCloud
from nodepool_operator.controllers._indexes import NODE_POOL, POD_NODE, node_pool, pod_node
from nodepool_operator.controllers._scope import POOL_LABEL
from nodepool_operator.operator import build_manager
from nodepool_operator.settings import OperatorSettings
from tests import factories


def filings(inf: Informer, obj: dict[str, object], value: str) -> list[str]:
    """The names of the informer's indexes that file ``obj`` under ``value``."""
    store = inf.store
    return [name for name in store.indexes if value in store.index_func(name)(obj)]


@pytest.mark.parametrize(
    "controllers", [("nodepool", "autoscaler"), ("autoscaler", "nodepool"), ("nodepool",)]
)
def test_each_index_is_registered_once_per_manager(
    tmp_path: Path, controllers: tuple[str, ...]
) -> None:
    mgr = build_manager(
        Snapshot([]).client,
        SimulatedCloud(tmp_path / "cloud.db"),
        OperatorSettings(),
        controllers=controllers,
    )
    bound = factories.pod("web-0", node="n1")
    pool_node = factories.node("n1", labels={POOL_LABEL: "big"})
    [pods] = [inf for inf in mgr.cache.informers if inf.resource == PODS]
    [nodes] = [inf for inf in mgr.cache.informers if inf.resource == NODES]
    assert filings(pods, bound, "n1") == [POD_NODE]
    assert filings(nodes, pool_node, "big") == [NODE_POOL]
    assert pods.store.index_func(POD_NODE) is pod_node
    assert nodes.store.index_func(NODE_POOL) is node_pool

"""What the node template needs beyond the pool: the cloud's instance types and the pool's
node class, read for each plan.

The types come from the cloud port (``CloudProvider.instance_types``: EC2's
DescribeInstanceTypes, the simulated cloud's catalogue), asked again only when a pool names a
type the last answer did not have (a catalogue rarely changes, and AwsCloud caches its own
answer too). Without a cloud (tests that run the Autoscaler alone) the simulated catalogue is
used. The node class is read from the cache (the NodePool controller watches the kind too;
a create reads it live): its kubelet settings and root volume decide the node's allocatable.
The cloud's region is the ``topology.kubernetes.io/region`` its zoned Nodes register with.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass

from kubeloop import Cache, Client
from nodepool_operator.api import AwsNodeClassSpec, NodePool
from nodepool_operator.cloud import CATALOGUE, CloudProvider, InstanceType
from nodepool_operator.controllers import _launch as launching


@dataclass(frozen=True, slots=True)
class TemplateInputs:
    catalogue: Sequence[InstanceType]
    node_class: AwsNodeClassSpec | None
    region: str = ""
    """The cloud's region ("" without a cloud: unknown)."""


class TemplateSources:
    """Reads :class:`TemplateInputs`; see the module docstring."""

    def __init__(
        self, client: Client, cloud: CloudProvider | None, cache: Cache | None = None
    ) -> None:
        self._client = client
        self._cloud = cloud
        self._cache = cache
        self._types: builtins.list[InstanceType] = [] if cloud is not None else list(CATALOGUE)

    async def read(self, pool: NodePool) -> TemplateInputs:
        """Raises:
        NodeClassUnavailable: the pool's node class is missing or invalid.
        CloudError: the cloud did not answer for its instance types.
        """
        name = pool.spec.instance_type
        if self._cloud is not None and all(t.name != name for t in self._types):
            self._types = await self._cloud.instance_types()
        node_class = await launching.node_class(
            self._client, pool.spec.node_class_ref, cache=self._cache
        )
        region = self._cloud.region if self._cloud is not None else ""
        return TemplateInputs(tuple(self._types), node_class, region)

"""Looking up what candidate pods reference, live from the API, for :mod:`._pending`.

Live GETs rather than informers: watching every Secret in the cluster would keep all Secret
data in the operator's memory to answer "does it exist?" for a handful of pending pods. Only
pods already past the batching window are looked up, and each distinct object once per
reconcile, so the cost follows the number of distinct references, not pods or nodes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Final

from kubeloop import (
    CONFIGMAPS,
    PERSISTENTVOLUMECLAIMS,
    SECRETS,
    Client,
    Forbidden,
    NotFound,
    Object,
    Resource,
)
from nodepool_operator.controllers.autoscaler._decode import claim, late_binding, volume_zones
from nodepool_operator.controllers.autoscaler._pending import Lookup, NamespacedName, Needs

__all__ = ["PERSISTENTVOLUMES", "STORAGECLASSES", "look_up"]

log = logging.getLogger("nodepool_operator.autoscaler")

STORAGECLASSES: Final = Resource(
    "storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False
)
PERSISTENTVOLUMES: Final = Resource(
    "", "v1", "persistentvolumes", "PersistentVolume", namespaced=False
)
#: Concurrent GETs per lookup: enough to hide latency, few enough not to burst the apiserver.
_CONCURRENCY: Final = 8


async def look_up(client: Client, pods: Iterable[Needs]) -> Lookup:
    """Find which of the Secrets, ConfigMaps, claims and claim classes ``pods`` need exist,
    and the zones the volumes of their bound claims are pinned to.

    Raises what the API raises, except NotFound (the object is missing) and Forbidden: without
    the permission to look, the object is assumed present, so a narrow RBAC role degrades to
    cluster-autoscaler's behaviour (scale anyway) instead of stopping the Autoscaler.
    """
    secrets: set[NamespacedName] = set()
    config_maps: set[NamespacedName] = set()
    claims: set[NamespacedName] = set()
    for needs in pods:
        namespace, refs = needs.namespace, needs.references
        secrets.update((namespace, name) for name in refs.secrets)
        config_maps.update((namespace, name) for name in refs.config_maps)
        claims.update((namespace, name) for name in refs.claims)
    gate = asyncio.Semaphore(_CONCURRENCY)

    async def get(res: Resource, namespace: str | None, name: str) -> Object | None:
        async with gate:
            return await _get(client, res, namespace, name)

    found_secrets, found_maps, found_claims = await asyncio.gather(
        _existing(secrets, lambda key: get(SECRETS, *key)),
        _existing(config_maps, lambda key: get(CONFIGMAPS, *key)),
        _existing(claims, lambda key: get(PERSISTENTVOLUMECLAIMS, *key)),
    )
    claims_found = {key: claim(obj) for key, obj in found_claims.items()}
    classes = {c.storage_class for c in claims_found.values() if c.phase != "Bound"} - {""}
    volumes = {c.volume for c in claims_found.values() if c.phase == "Bound"} - {""}
    found_classes, found_volumes = await asyncio.gather(
        _existing({("", name) for name in classes}, lambda key: get(STORAGECLASSES, None, key[1])),
        _existing(
            {("", name) for name in volumes}, lambda key: get(PERSISTENTVOLUMES, None, key[1])
        ),
    )
    return Lookup(
        secrets=frozenset(found_secrets),
        config_maps=frozenset(found_maps),
        claims=claims_found,
        late_binding_classes=frozenset(
            name for (_, name), cls in found_classes.items() if late_binding(cls)
        ),
        volume_zones={
            name: zones for (_, name), pv in found_volumes.items() if (zones := volume_zones(pv))
        },
    )


async def _existing(
    keys: set[NamespacedName], get: Callable[[NamespacedName], Awaitable[Object | None]]
) -> dict[NamespacedName, Object]:
    ordered = sorted(keys)
    objects = await asyncio.gather(*(get(key) for key in ordered))
    return {key: obj for key, obj in zip(ordered, objects, strict=True) if obj is not None}


async def _get(client: Client, res: Resource, namespace: str | None, name: str) -> Object | None:
    try:
        return await client.get(res, name, namespace)
    except NotFound:
        return None
    except Forbidden as err:
        log.warning("cannot read %s %s/%s; assuming it exists: %s", res.kind, namespace, name, err)
        # A stub that blocks nothing stands for the object we may not read: a bound claim,
        # a late-binding class.
        return {
            "metadata": {"name": name, "namespace": namespace},
            "status": {"phase": "Bound"},
            "volumeBindingMode": "WaitForFirstConsumer",
        }

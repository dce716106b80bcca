"""A cache read that has to start an informer, under real RBAC: a ServiceAccount that may
``get`` Secrets but not ``list`` them (least privilege) gets a clear, retriable error
naming the kind and the refused verb, instead of a worker waiting for ever for a sync
that cannot happen."""

from __future__ import annotations

import asyncio

import pytest

from kubeloop import (
    SECRETS,
    Cache,
    CacheReadError,
    Client,
    ClusterConfig,
    ErrorClass,
    ReflectorOptions,
    classify,
)
from kubeloop._resource import ROLEBINDINGS, ROLES, SERVICEACCOUNTS
from kubeloop.envtest import ControlPlane
from kubeloop.testing import eventually
from kubeloop.testing.faults import FaultProxy, internal_error

pytestmark = pytest.mark.integration

VERBS = ["get", "list", "watch"]


async def get_only_token(admin: Client, ns: str) -> str:
    """A token of a ServiceAccount allowed only ``get`` on Secrets in ``ns``."""
    await admin.create(SERVICEACCOUNTS, {"metadata": {"name": "reader"}}, ns)
    rules = [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    await admin.create(ROLES, {"metadata": {"name": "get-secrets"}, "rules": rules}, ns)
    binding = {
        "metadata": {"name": "get-secrets"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "get-secrets"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": ns}],
    }
    await admin.create(ROLEBINDINGS, binding, ns)
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": "reader"},
        "spec": {},
    }
    answer = await admin.create(SERVICEACCOUNTS, request, ns, subresource="token")
    return str(answer["status"]["token"])


async def test_a_read_needing_list_without_list_rbac_fails_clearly_and_retriably(
    kube_control_plane: ControlPlane, kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube_client.create(SECRETS, {"metadata": {"name": "s"}, "stringData": {"k": "v"}}, ns)
    token = await get_only_token(kube_client, ns)
    config = ClusterConfig(
        kube_control_plane.server, ca_data=kube_control_plane.ca_file.read_bytes(), token=token
    )
    async with Client(config) as reader:
        assert (await reader.get(SECRETS, "s", ns))["metadata"]["name"] == "s"  # get works
        # quick relists, so the test shows the error comes from the first refusal
        cache = Cache(reader, options=ReflectorOptions(backoff_initial=0.05, backoff_max=0.1))
        try:
            # bounded by the test, not the cache: before the fix this waited for ever
            async with asyncio.timeout(30):
                with pytest.raises(CacheReadError) as raised:
                    await cache.get(SECRETS, "s", ns)
            err = raised.value
            assert "secrets" in str(err)
            assert "list" in str(err)
            assert err.verb == "list"
            assert err.resource == SECRETS
            assert classify(err) is not ErrorClass.TERMINAL  # RBAC may be granted: retry
            # a second read fails the same way, at once, while RBAC still refuses
            async with asyncio.timeout(30):
                with pytest.raises(CacheReadError):
                    await cache.list(SECRETS, ns)
            # retriable indeed: once the role allows list and watch, the same read works
            allowed = [{"apiGroups": [""], "resources": ["secrets"], "verbs": VERBS}]
            await kube_client.patch(ROLES, "get-secrets", {"rules": allowed}, ns)

            async def served() -> bool:
                try:
                    return await cache.get(SECRETS, "s", ns) is not None
                except CacheReadError:
                    return False

            await eventually(served, "the read served once list and watch are granted")
        finally:
            await cache.stop()


async def test_a_read_whose_informer_cannot_sync_fails_after_the_bound(
    kube_fault_proxy: FaultProxy, kube_client: Client, kube_namespace: str
) -> None:
    ns = kube_namespace
    await kube_client.create(SECRETS, {"metadata": {"name": "s"}}, ns)
    # every LIST of Secrets fails (not a refusal: it could pass on the next try)
    kube_fault_proxy.add_rule(internal_error(), verb="list", resource="secrets")
    async with Client(kube_fault_proxy.client_config("op")) as op:
        cache = Cache(
            op,
            options=ReflectorOptions(backoff_initial=0.05, backoff_max=0.1),
            read_sync_timeout=1.0,
        )
        try:
            async with asyncio.timeout(30):
                with pytest.raises(CacheReadError, match="did not sync within 1s") as raised:
                    await cache.get(SECRETS, "s", ns)
        finally:
            await cache.stop()
    assert raised.value.verb == "list"
    assert "500" in str(raised.value)
    assert classify(raised.value) is ErrorClass.BACKOFF
    # every LIST the informer sent got the injected 500: no sync was possible
    assert {e.status for e in kube_fault_proxy.log.entries(client="op", verb="list")} == {500}

"""A LIST that times out is a failed list, retried with backoff, not a stalled watch
(issue 23, bug 8): the reflector counted it as a watch stall and listed again at once,
so an apiserver too slow to answer a LIST got one more every request timeout."""

from __future__ import annotations

import asyncio

import pytest

from kubeloop import CONFIGMAPS, Client
from kubeloop._informer import Informer
from kubeloop._reflector import ReflectorOptions
from kubeloop._transport import HttpTransport
from kubeloop.testing import eventually
from kubeloop.testing.faults import FaultProxy, Hang

pytestmark = pytest.mark.integration


async def test_a_list_timeout_backs_off_and_is_not_a_stall(
    kube_fault_proxy: FaultProxy, kube_namespace: str
) -> None:
    proxy = kube_fault_proxy
    config = proxy.client_config("informer")
    client = Client(config, transport=HttpTransport(config, request_timeout=0.3))
    # every LIST hangs past the client's request timeout
    proxy.add_rule(Hang(), client="informer", verb="list")
    # a long first backoff: after the first timed-out LIST the next one waits for it
    options = ReflectorOptions(backoff_initial=30.0, backoff_max=30.0)
    inf = Informer(client, CONFIGMAPS, namespace=kube_namespace, options=options)
    inf.start()
    try:
        refl = inf.reflector
        await eventually(lambda: refl.last_error is not None or refl.stalls > 0, "a failed LIST")
        # the client retries a timed-out GET itself: that is one LIST of the reflector's
        first = len(proxy.log.entries(client="informer", verb="list"))
        # several request timeouts later: no new LIST, the reflector is backing off
        await asyncio.sleep(2.0)
        lists = len(proxy.log.entries(client="informer", verb="list"))
        assert lists == first, f"LISTs {first} -> {lists}: a timed-out LIST relisted at once"
        assert inf.reflector.stalls == 0, "a LIST timeout is not a watch stall"
        assert "list" in str(inf.reflector.last_error), inf.reflector.last_error
    finally:
        await inf.stop()
        await client.close()

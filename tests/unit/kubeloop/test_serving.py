"""Probe and metrics addresses follow Go's ``host:port``: no host is every interface.

The kubelet probes the pod's IP, so a probe server on loopback only fails every
probe. Every address in 127.0.0.0/8 is a different local address, so reaching the
server on 127.0.0.2 tells a wildcard bind from a 127.0.0.1 one.
"""

from __future__ import annotations

import aiohttp
import pytest

from kubeloop import ManagerOptions
from kubeloop._serving import Endpoints


def test_defaults_are_controller_runtimes() -> None:
    opts = ManagerOptions()
    assert opts.health_probe_bind_address == ":8081"
    assert opts.metrics_bind_address == ":8080"


async def _get(url: str) -> int:
    async with (
        aiohttp.ClientSession() as http,
        http.get(url, timeout=aiohttp.ClientTimeout(total=5)) as resp,
    ):
        return resp.status


async def test_an_address_without_host_serves_every_interface() -> None:
    ep = Endpoints(lambda: "", healthz={"ping": lambda: None}, readyz={})
    await ep.start(None, ":0")
    try:
        _, port = ep.addresses["probes"]
        assert await _get(f"http://127.0.0.2:{port}/healthz") == 200
        assert await _get(ep.url("probes") + "/healthz") == 200
    finally:
        await ep.stop()


async def test_a_loopback_address_serves_loopback_only() -> None:
    ep = Endpoints(lambda: "", healthz={"ping": lambda: None}, readyz={})
    await ep.start(None, "127.0.0.1:0")
    try:
        _, port = ep.addresses["probes"]
        assert await _get(f"http://127.0.0.1:{port}/healthz") == 200
        with pytest.raises(aiohttp.ClientConnectionError):
            await _get(f"http://127.0.0.2:{port}/healthz")
    finally:
        await ep.stop()


async def test_a_failing_check_names_what_failed() -> None:
    ep = Endpoints(
        lambda: "",
        healthz={"ping": lambda: None, "workers": lambda: "pools: 1 of 2 workers dead"},
        readyz={},
    )
    await ep.start(None, "127.0.0.1:0")
    try:
        async with (
            aiohttp.ClientSession() as http,
            http.get(ep.url("probes") + "/healthz") as resp,
        ):
            assert resp.status == 500
            body = await resp.text()
    finally:
        await ep.stop()
    assert "[+]ping ok" in body
    assert "[-]workers failed: pools: 1 of 2 workers dead" in body

"""The raw limit: a minimal client issuing the status writes as fast as the apiserver takes them.

"Minimal" means plain aiohttp and nothing else: one ``ClientSession`` whose keep-alive pool
holds exactly ``--concurrency`` connections (opened before the clock starts), the TLS client
certificate from the kubeconfig, and ``--concurrency`` coroutines taking the next object
from a shared list. Each write is the request kubeloop's ``update_status`` sends: ``PUT
.../<name>/status`` with the whole object (managedFields stripped, as kubeloop's cache
strips them) carrying its resourceVersion and the new status. Bodies are encoded before the
clock starts; responses are read but not decoded, only their status code is checked.
It does not import kubeloop (its peak RSS is that of Python, aiohttp and PyYAML).

Run by ``bench/throughput.py``; by hand (the objects must exist and have no status yet)::

    python -m bench._raw --kubeconfig K --concurrency 16 \\
        --collection /apis/bench.kubeloop.dev/v1/namespaces/NS/samples

prints ``{"writes": ..., "errors": ..., "seconds": ..., "cpu_s": ...}``.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import resource
import ssl
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from bench import machine_cpu_seconds, peak_rss_mib, process_cpu_seconds


@dataclass(frozen=True)
class Cluster:
    """The current context of a kubeconfig: just what a TLS connection needs."""

    server: str
    ca: bytes | None = None
    cert: bytes | None = None
    key: bytes | None = None
    token: str | None = None
    insecure: bool = False


def load_cluster(path: str) -> Cluster:
    """The current context of a kubeconfig (``*-data`` fields or file paths, or a token)."""
    file = Path(path)
    doc = yaml.safe_load(file.read_text())

    def named(section: str, name: str) -> dict[str, Any]:
        entry = next(e for e in doc[section] if e["name"] == name)
        body: dict[str, Any] = entry[section[:-1]]
        return body

    ctx = named("contexts", doc["current-context"])
    cluster = named("clusters", ctx["cluster"])
    user = named("users", ctx["user"]) if ctx.get("user") else {}

    def blob(section: dict[str, Any], key: str) -> bytes | None:
        if section.get(f"{key}-data"):
            return base64.b64decode(section[f"{key}-data"])
        if section.get(key):
            return (file.parent / str(section[key])).read_bytes()
        return None

    return Cluster(
        server=str(cluster["server"]).rstrip("/"),
        ca=blob(cluster, "certificate-authority"),
        cert=blob(user, "client-certificate"),
        key=blob(user, "client-key"),
        token=user.get("token"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def ssl_context(cluster: Cluster) -> ssl.SSLContext:
    """Server verification and client certificate, as the kubeconfig says."""
    if cluster.insecure:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif cluster.ca:
        ctx = ssl.create_default_context(cadata=cluster.ca.decode("ascii"))
    else:
        ctx = ssl.create_default_context()
    if cluster.cert is not None and cluster.key is not None:
        fd, name = tempfile.mkstemp(suffix=".pem")  # ssl loads certificates only from files
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(cluster.cert.rstrip(b"\n") + b"\n" + cluster.key)
            ctx.load_cert_chain(name)
        finally:
            os.unlink(name)
    return ctx


@dataclass(frozen=True)
class Api:
    """A plain aiohttp session for one cluster."""

    http: aiohttp.ClientSession
    base: str
    headers: dict[str, str]

    async def json(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        async with self.http.request(
            method, self.base + path, data=data, headers=self.headers
        ) as resp:
            text = await resp.read()
            if resp.status >= 400:
                raise RuntimeError(f"{method} {path}: {resp.status} {text[:300]!r}")
            return json.loads(text)


@contextlib.asynccontextmanager
async def connect(kubeconfig: str, connections: int) -> AsyncIterator[Api]:
    cluster = load_cluster(kubeconfig)
    headers = {"Accept": "application/json", "Content-Type": "application/json"}
    if cluster.token:
        headers["Authorization"] = f"Bearer {cluster.token}"
    tls = ssl_context(cluster) if cluster.server.startswith("https://") else False
    connector = aiohttp.TCPConnector(ssl=tls, limit=connections)
    async with aiohttp.ClientSession(connector=connector) as http:
        yield Api(http, cluster.server, headers)


def status_write(collection: str, obj: dict[str, Any]) -> tuple[str, bytes]:
    """The path and body of the status write for ``obj``: phase Ready, this generation."""
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    body = {
        **obj,
        "metadata": meta,
        "status": {"phase": "Ready", "observedGeneration": meta["generation"]},
    }
    return f"{collection}/{meta['name']}/status", json.dumps(body, separators=(",", ":")).encode()


async def write_all(
    kubeconfig: str, collection: str, concurrency: int, server_pids: list[int]
) -> dict[str, Any]:
    """PUT every object of ``collection`` (a namespaced list path) to its ``/status``."""
    async with connect(kubeconfig, concurrency) as api:
        listed = await api.json("GET", collection)
        writes = [status_write(collection, item) for item in listed["items"]]
        # open every connection of the pool before the clock starts
        await asyncio.gather(*(api.json("GET", "/version") for _ in range(concurrency)))
        pending = iter(writes)
        errors: dict[int, int] = {}

        async def worker() -> None:
            for path, body in pending:  # shared: each object is taken by one worker
                async with api.http.put(api.base + path, data=body, headers=api.headers) as resp:
                    await resp.read()
                    if resp.status != 200:
                        errors[resp.status] = errors.get(resp.status, 0) + 1

        server_before = process_cpu_seconds(server_pids)
        machine_before = machine_cpu_seconds()
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        server_cpu = process_cpu_seconds(server_pids) - server_before
        machine_cpu = machine_cpu_seconds() - machine_before
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "writes": len(writes),
        "errors": {str(k): v for k, v in errors.items()},
        "seconds": seconds,
        "cpu_s": cpu,
        "server_cpu_s": server_cpu if server_pids else None,
        "machine_cpu_s": machine_cpu,
        "peak_rss_mib": peak_rss_mib(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument(
        "--collection",
        required=True,
        help="list path, e.g. /apis/bench.kubeloop.dev/v1/namespaces/NS/samples",
    )
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--server-pids", default="", help="comma-separated, for their CPU time")
    args = parser.parse_args()
    pids = [int(p) for p in args.server_pids.split(",") if p]
    result = asyncio.run(write_all(args.kubeconfig, args.collection, args.concurrency, pids))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

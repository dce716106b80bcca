"""The manager's HTTP endpoints: ``/metrics``, ``/healthz`` and ``/readyz``.

Addresses are Go's ``host:port``: ``":8081"`` (no host) listens on every
interface, as controller-runtime's does, because the kubelet probes the pod's
IP, not loopback; ``"127.0.0.1:8081"`` listens on loopback only; port 0 picks a
free port.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from aiohttp import web

#: A named check: returns None when healthy, else the reason it is not.
Check = Callable[[], str | None]

_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _check_response(checks: dict[str, Check]) -> web.Response:
    lines, ok = [], True
    for name, check in checks.items():
        reason = check()
        if reason is None:
            lines.append(f"[+]{name} ok")
        else:
            ok = False
            lines.append(f"[-]{name} failed: {reason}")
    lines.append("healthz check passed" if ok else "healthz check failed")
    return web.Response(status=200 if ok else 500, text="\n".join(lines) + "\n")


async def start_site(
    app: web.Application, address: str, *, ssl_context: ssl.SSLContext | None = None
) -> tuple[web.AppRunner, tuple[str, int]]:
    """Serve ``app`` on ``address`` (``host:port``, see above); return its runner and the
    address actually bound (the real port when 0 was asked)."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")  # "[::1]:8081"
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    # no host: every interface; IPv4 only with port 0, so there is one port to report
    if not host and int(port) == 0:
        host = "0.0.0.0"
    site = web.TCPSite(runner, host or None, int(port), ssl_context=ssl_context)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    server = site._server  # the bound socket tells the real port when 0 was asked
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname() if sockets else (host, int(port))
    return runner, (bound[0], bound[1])


def url_host(host: str, port: int) -> str:
    """``host:port`` for a URL to a bound address (a wildcard becomes loopback)."""
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    return f"{host}:{port}"


class Endpoints:
    """Serves metrics and probes on one or two addresses (``host:port``; port 0 picks one)."""

    def __init__(
        self,
        render_metrics: Callable[[], str],
        healthz: dict[str, Check],
        readyz: dict[str, Check],
    ) -> None:
        self._render = render_metrics
        self.healthz = healthz
        self.readyz = readyz
        self._runners: list[web.AppRunner] = []
        self.addresses: dict[str, tuple[str, int]] = {}

    def _app(self, *, metrics: bool, probes: bool) -> web.Application:
        app = web.Application()
        if metrics:

            async def metrics_handler(_: web.Request) -> web.Response:
                return web.Response(
                    body=self._render().encode(), headers={"Content-Type": _METRICS_TYPE}
                )

            app.router.add_get("/metrics", metrics_handler)
        if probes:

            async def healthz(_: web.Request) -> web.Response:
                return _check_response(self.healthz)

            async def readyz(_: web.Request) -> web.Response:
                return _check_response(self.readyz)

            app.router.add_get("/healthz", healthz)
            app.router.add_get("/readyz", readyz)
        return app

    async def start(self, metrics_address: str | None, probe_address: str | None) -> None:
        if metrics_address and metrics_address == probe_address:
            await self._serve("both", metrics_address, self._app(metrics=True, probes=True))
            return
        if metrics_address:
            await self._serve("metrics", metrics_address, self._app(metrics=True, probes=False))
        if probe_address:
            await self._serve("probes", probe_address, self._app(metrics=False, probes=True))

    async def _serve(self, role: str, address: str, app: web.Application) -> None:
        runner, self.addresses[role] = await start_site(app, address)
        self._runners.append(runner)

    def url(self, role: str) -> str:
        for key in (role, "both"):
            if key in self.addresses:
                return f"http://{url_host(*self.addresses[key])}"
        raise KeyError(role)

    async def stop(self) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

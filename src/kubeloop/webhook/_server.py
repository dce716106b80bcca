"""The webhook server: admission and conversion webhooks over HTTPS, on aiohttp.

The manager runs it beside metrics and probes on every replica, leader or not: the
apiserver calls whichever pod the Service picks, so a standby that refused to answer
would fail one call in N. Handlers must therefore not depend on leading.

Every path is one webhook, labelled by its path in the ``controller_runtime_webhook_*``
metrics. A body that is not a review gets HTTP 400 with a message (the apiserver reports
it as a failed call); anything a handler does wrong becomes a denial or a failed
conversion inside an HTTP 200, so the apiserver shows the client our message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from kubeloop._metrics import REGISTRY, Registry, WebhookMetrics
from kubeloop._serving import start_site, url_host
from kubeloop.webhook._admission import (
    MalformedReview,
    Mutator,
    Validator,
    parse_admission_review,
    review_admission,
)
from kubeloop.webhook._certwatcher import CertWatcher
from kubeloop.webhook._conversion import (
    Converter,
    MalformedConversionReview,
    parse_conversion_review,
    review_conversion,
)

log = logging.getLogger("kubeloop.webhook")

#: controller-runtime's default: ``<tmp>/k8s-webhook-server/serving-certs``
DEFAULT_CERT_DIR = str(Path(tempfile.gettempdir()) / "k8s-webhook-server" / "serving-certs")


@dataclass
class WebhookServerOptions:
    """Where and how the webhook server listens. Defaults follow controller-runtime."""

    #: ``host:port``; an empty host binds every interface (the Service targets the pod
    #: IP), port 0 picks a free one. Default ``":9443"``.
    bind_address: str = ":9443"
    #: The directory holding the serving certificate (a mounted cert-manager Secret).
    cert_dir: str | os.PathLike[str] = DEFAULT_CERT_DIR
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    #: Seconds between looks at the certificate files for a rotation.
    cert_reload_interval: float = 10.0
    #: Largest request body accepted (an AdmissionReview holds the object twice on UPDATE).
    max_body_bytes: int = 16 * 1024 * 1024


Handler = Callable[[Any], Awaitable[dict[str, Any]]]


class WebhookServer:
    """Serves validating, mutating and conversion webhooks, one path each.

    Register every webhook before :meth:`start` (the manager starts it in
    :meth:`~kubeloop.Manager.run`)::

        server = mgr.webhook_server(WebhookServerOptions(cert_dir="/certs"))
        server.add_validating("/validate-widgets", validate_widget)
        server.add_mutating("/mutate-widgets", default_widget)
        server.add_conversion("/convert-widgets", widget_converter)
    """

    def __init__(
        self, options: WebhookServerOptions | None = None, *, registry: Registry = REGISTRY
    ) -> None:
        self.options = opts = options or WebhookServerOptions()
        self.metrics = WebhookMetrics(registry)
        self.cert_watcher = CertWatcher(
            Path(opts.cert_dir) / opts.cert_name,
            Path(opts.cert_dir) / opts.key_name,
            interval=opts.cert_reload_interval,
        )
        self._handlers: dict[str, Handler] = {}
        self._runner: web.AppRunner | None = None
        self._watch_task: asyncio.Task[None] | None = None
        #: the address actually bound (the real port when 0 was asked), once started
        self.address: tuple[str, int] | None = None

    # -- registering ---------------------------------------------------------------------
    def _add(self, path: str, handler: Handler) -> None:
        if not path.startswith("/"):
            raise ValueError(f"webhook path must start with '/': {path!r}")
        if path in self._handlers:
            raise ValueError(f"a webhook is already registered at {path}")
        if self._runner is not None:
            raise RuntimeError(f"webhook {path}: register webhooks before the server starts")
        self._handlers[path] = handler
        for code in ("200", "400", "500"):  # present from the start, as controller-runtime
            self.metrics.requests_total.labels(path, code)
        self.metrics.requests_in_flight.labels(path).set(0)

    def add_validating(self, path: str, validator: Validator) -> None:
        """Serve a validating admission webhook at ``path``."""

        async def handle(body: Any) -> dict[str, Any]:
            return await review_admission(path, parse_admission_review(body), validator=validator)

        self._add(path, handle)

    def add_mutating(self, path: str, mutator: Mutator) -> None:
        """Serve a mutating admission webhook at ``path``: ``mutator(request, obj)``
        changes ``obj``, a deep copy; the JSON patch is computed from the difference."""

        async def handle(body: Any) -> dict[str, Any]:
            return await review_admission(path, parse_admission_review(body), mutator=mutator)

        self._add(path, handle)

    def add_conversion(self, path: str, converter: Converter) -> None:
        """Serve a CRD conversion webhook at ``path`` (the CRD's
        ``spec.conversion.webhook.clientConfig`` names it)."""

        async def handle(body: Any) -> dict[str, Any]:
            uid, desired, objects = parse_conversion_review(body)
            return review_conversion(path, converter, uid, desired, objects)

        self._add(path, handle)

    @property
    def paths(self) -> list[str]:
        return list(self._handlers)

    # -- serving ---------------------------------------------------------------------------
    async def _serve(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        handler = self._handlers[path]
        in_flight = self.metrics.requests_in_flight.labels(path)
        in_flight.inc()
        started = time.perf_counter()
        code = 500
        try:
            response = await self._answer(request, handler)
            code = response.status
            return response
        finally:
            in_flight.dec()
            self.metrics.latency_seconds.labels(path).observe(time.perf_counter() - started)
            self.metrics.requests_total.labels(path, str(code)).inc()

    async def _answer(self, request: web.Request, handler: Handler) -> web.Response:
        if request.content_type != "application/json":
            return _bad_request(
                f"Content-Type must be application/json, got {request.content_type!r}"
            )
        try:
            body = json.loads(await request.read())
        except web.HTTPRequestEntityTooLarge:
            return _bad_request(f"request body over {self.options.max_body_bytes} bytes")
        except ValueError as err:
            return _bad_request(f"request body is not JSON: {err}")
        try:
            review = await handler(body)
        except (MalformedReview, MalformedConversionReview) as err:
            log.warning("webhook %s: malformed review: %s", request.path, err)
            return _bad_request(str(err))
        return web.json_response(review)

    async def start(self) -> None:
        """Load the certificate (failing at once if there is none), listen, and follow
        the certificate files for rotations."""
        if self._runner is not None:
            return
        await asyncio.to_thread(self.cert_watcher.load)
        app = web.Application(client_max_size=self.options.max_body_bytes)
        for path in self._handlers:
            app.router.add_post(path, self._serve)
        self._runner, self.address = await start_site(
            app, self.options.bind_address, ssl_context=self.cert_watcher.ssl_context
        )
        self._watch_task = asyncio.get_running_loop().create_task(
            self.cert_watcher.run(), name="webhook certificate watcher"
        )
        log.info(
            "webhook server listening on %s",
            url_host(*self.address),
            extra={"webhooks": self.paths, "cert_dir": str(self.options.cert_dir)},
        )

    async def stop(self) -> None:
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
            self._watch_task = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def url(self, path: str = "") -> str:
        """``https://host:port<path>`` of the running server (a wildcard bind is loopback)."""
        if self.address is None:
            raise RuntimeError("the webhook server has not started")
        return f"https://{url_host(*self.address)}{path}"

    def started_check(self) -> str | None:
        """A readiness check: None once the server listens."""
        return None if self._runner is not None else "webhook server not started"


def _bad_request(message: str) -> web.Response:
    return web.Response(status=400, text=message + "\n")

"""A minimal synchronous HTTPS client for setting up a control plane.

envtest must work before (and independently of) kubeloop's async client, and its
callers are often synchronous pytest fixtures, so it speaks plain http.client.
"""

from __future__ import annotations

import http.client
import json
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


@dataclass
class RestError(Exception):
    status: int
    body: str

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.body[:500]}"


class RestClient:
    """Sends one request per connection; fine for set-up traffic."""

    def __init__(self, server: str, ca_file: Path, cert_file: Path, key_file: Path) -> None:
        parts = urlsplit(server)
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or 443
        self._ctx = ssl.create_default_context(cafile=str(ca_file))
        self._ctx.load_cert_chain(str(cert_file), str(key_file))

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Any:
        conn = http.client.HTTPSConnection(
            self._host, self._port, context=self._ctx, timeout=timeout
        )
        try:
            payload = None if body is None else json.dumps(body).encode()
            headers = {"Accept": "application/json"}
            if payload is not None:
                headers["Content-Type"] = content_type
            conn.request(method, path, body=payload, headers=headers)
            resp = conn.getresponse()
            data = resp.read().decode(errors="replace")
        finally:
            conn.close()
        if resp.status >= 400:
            raise RestError(resp.status, data)
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            return data

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.request("POST", path, body)

    def delete(self, path: str) -> Any:
        return self.request("DELETE", path)

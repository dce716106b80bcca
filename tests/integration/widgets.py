"""A small test CRD with the status subresource, shared by the integration tests."""

from __future__ import annotations

from typing import Any

from kubeloop.testing import resource_of, simple_crd

GROUP = "semantics.kubeloop.dev"
WIDGET_CRD = simple_crd(
    GROUP,
    "Widget",
    spec={"size": {"type": "integer", "minimum": 0}},
    status={"phase": {"type": "string"}},
)
WIDGETS = resource_of(WIDGET_CRD)


def widget(name: str, size: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size},
    }

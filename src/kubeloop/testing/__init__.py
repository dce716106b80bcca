"""Test support for kubeloop users: a pytest plugin with a real control plane, and
helpers for tests of controllers.

Installed as a pytest plugin (entry point ``kubeloop``), it provides:

``kube_control_plane``
    One :class:`~kubeloop.envtest.ControlPlane` (etcd, kube-apiserver,
    kube-scheduler) per test session, built from source on first use.
``kube_namespace``
    A fresh namespace per test.
``kube_nodes``
    A factory of kubelet-less Nodes the scheduler binds pods to; they are
    deleted after the test (lean control plane only: on ``kube_cluster`` such
    Nodes go ``Unknown``; create kwok Nodes with ``create_node(name, kwok=True)``).
``kube_cluster``
    The full test bed per session: the control plane plus kube-controller-manager
    and kwok (``plugin.CLUSTER_OPTIONS``). Nodes annotated for kwok are heartbeated
    with Leases and run their pods; ``silence_node``/``revive_node`` stop and
    resume one Node's heartbeats; namespaces finish deleting; ownerReferences
    cascade; PodDisruptionBudgets get a status.

Helpers (they need no pytest):

:func:`simple_crd`, :class:`ScaleSpec`, :func:`resource_of`
    A small CRD to install, and the :class:`~kubeloop.Resource` it defines.
:func:`eventually`
    Wait for a plain or async predicate, failing with what was awaited.
:func:`new_manager`, :func:`running`
    A Manager without servers or signal handlers, run for the body of an ``async with``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubeloop.testing._crd import ScaleSpec, resource_of, simple_crd
from kubeloop.testing._helpers import eventually, new_manager, running

if TYPE_CHECKING:
    from kubeloop.testing.plugin import NodeFactory

__all__ = [
    "NodeFactory",
    "ScaleSpec",
    "eventually",
    "new_manager",
    "resource_of",
    "running",
    "simple_crd",
]


def __getattr__(name: str) -> Any:
    # the plugin module imports pytest; the helpers above do not need it
    if name == "NodeFactory":
        from kubeloop.testing.plugin import NodeFactory

        return NodeFactory
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

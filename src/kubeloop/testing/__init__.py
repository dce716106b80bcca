"""Test support for kubeloop users: a pytest plugin with a real control plane.

Installed as a pytest plugin (entry point ``kubeloop``), it provides:

``kube_control_plane``
    One :class:`~kubeloop.envtest.ControlPlane` (etcd, kube-apiserver,
    kube-scheduler) per test session, built from source on first use.
``kube_namespace``
    A fresh namespace per test.
``kube_nodes``
    A factory of kubelet-less Nodes the scheduler binds pods to; they are
    deleted after the test.
"""

from kubeloop.testing.plugin import NodeFactory

__all__ = ["NodeFactory"]

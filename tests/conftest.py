"""Suite-wide hygiene: a test that starts a control plane must say so.

``-m "not integration"`` is how a quick run skips everything that needs the real
kube-apiserver, so a test that starts one without the ``integration`` marker breaks that
run (it starts etcd and the apiserver where nobody expected them). Two checks make a
missing marker an error rather than a surprise:

* at collection: a test whose fixture closure includes ``kube_control_plane`` (directly or
  through ``kube_client``, ``kube_namespace``, ``operator_env``, ...) or whose module
  constructs a :class:`~kubeloop.envtest.ControlPlane` itself must carry the marker;
* at run time: :meth:`ControlPlane.start` called while an unmarked test runs fails it.
"""

from __future__ import annotations

from tests._hygiene import (  # re-exported as this conftest's hooks
    pytest_collection_modifyitems,
    pytest_runtest_protocol,
)

__all__ = ["pytest_collection_modifyitems", "pytest_runtest_protocol"]

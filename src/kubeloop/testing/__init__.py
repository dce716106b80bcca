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
``kube_fault_proxy``
    A :class:`FaultProxy` in front of the control plane, for one test.

Helpers (they need no pytest):

:func:`simple_crd`, :class:`ScaleSpec`, :func:`resource_of`
    A small CRD to install, and the :class:`~kubeloop.Resource` it defines.
:func:`eventually`
    Wait for a plain or async predicate, failing with what was awaited.
:func:`new_manager`, :func:`running`
    A Manager without servers or signal handlers, run for the body of an ``async with``.
:class:`Snapshot`, :func:`reconcile_once`, :class:`Write`
    One reconcile in process, no apiserver: reads from a fixed set of objects, every
    write recorded (not applied) for the test to assert on.

Fault injection and oracles (imported on first use, so this package stays light):

:class:`FaultProxy` (module :mod:`kubeloop.testing.faults`)
    A TLS proxy in front of the real apiserver that delays, throttles, fails, resets,
    blackholes and partitions chosen clients' requests and cuts their watches, and logs
    every request with the apiserver's answer.
:mod:`kubeloop.testing.oracles`
    Sieve's differential check (:func:`capture_state`, :func:`compare_runs`) and
    Anvil's eventually-stable check (:func:`eventually_stable`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubeloop.testing._crd import ScaleSpec, resource_of, simple_crd
from kubeloop.testing._helpers import eventually, new_manager, running
from kubeloop.testing._reconcile_once import reconcile_once
from kubeloop.testing._snapshot import Snapshot, Write

if TYPE_CHECKING:
    from kubeloop.testing.faults import (
        CutWatch,
        Delay,
        DropEvents,
        DropResponse,
        FaultLog,
        FaultProxy,
        Hang,
        LogEntry,
        Match,
        Reset,
        Respond,
        Rule,
        StaleRead,
        gateway_timeout,
        internal_error,
        service_unavailable,
        too_many_requests,
    )
    from kubeloop.testing.oracles import (
        Difference,
        Normalizer,
        NotStable,
        OpCount,
        RunRecord,
        Stable,
        State,
        Violation,
        WatchRecorder,
        assert_no_differences,
        capture_state,
        compare_operations,
        compare_runs,
        compare_states,
        eventually_stable,
        live_mismatches,
        never_decreases,
        nondeterministic_paths,
        operations_from_log,
        subset_mismatches,
    )
    from kubeloop.testing.plugin import NodeFactory

__all__ = [
    "CutWatch",
    "Delay",
    "Difference",
    "DropEvents",
    "DropResponse",
    "FaultLog",
    "FaultProxy",
    "Hang",
    "LogEntry",
    "Match",
    "NodeFactory",
    "Normalizer",
    "NotStable",
    "OpCount",
    "Reset",
    "Respond",
    "Rule",
    "RunRecord",
    "ScaleSpec",
    "Snapshot",
    "Stable",
    "StaleRead",
    "State",
    "Violation",
    "WatchRecorder",
    "Write",
    "assert_no_differences",
    "capture_state",
    "compare_operations",
    "compare_runs",
    "compare_states",
    "eventually",
    "eventually_stable",
    "gateway_timeout",
    "internal_error",
    "live_mismatches",
    "never_decreases",
    "new_manager",
    "nondeterministic_paths",
    "operations_from_log",
    "reconcile_once",
    "resource_of",
    "running",
    "service_unavailable",
    "simple_crd",
    "subset_mismatches",
    "too_many_requests",
]


#: Names served lazily from a submodule: importing them costs aiohttp's server side
#: and the certificate code, which most tests never need.
_LAZY = {
    "FaultProxy": "kubeloop.testing.faults",
    "FaultLog": "kubeloop.testing.faults",
    "LogEntry": "kubeloop.testing.faults",
    "Match": "kubeloop.testing.faults",
    "Rule": "kubeloop.testing.faults",
    "StaleRead": "kubeloop.testing.faults",
    "Delay": "kubeloop.testing.faults",
    "DropEvents": "kubeloop.testing.faults",
    "DropResponse": "kubeloop.testing.faults",
    "Respond": "kubeloop.testing.faults",
    "Reset": "kubeloop.testing.faults",
    "Hang": "kubeloop.testing.faults",
    "CutWatch": "kubeloop.testing.faults",
    "too_many_requests": "kubeloop.testing.faults",
    "internal_error": "kubeloop.testing.faults",
    "service_unavailable": "kubeloop.testing.faults",
    "gateway_timeout": "kubeloop.testing.faults",
    "Difference": "kubeloop.testing.oracles",
    "Normalizer": "kubeloop.testing.oracles",
    "RunRecord": "kubeloop.testing.oracles",
    "State": "kubeloop.testing.oracles",
    "OpCount": "kubeloop.testing.oracles",
    "NotStable": "kubeloop.testing.oracles",
    "Stable": "kubeloop.testing.oracles",
    "WatchRecorder": "kubeloop.testing.oracles",
    "Violation": "kubeloop.testing.oracles",
    "never_decreases": "kubeloop.testing.oracles",
    "capture_state": "kubeloop.testing.oracles",
    "compare_runs": "kubeloop.testing.oracles",
    "compare_states": "kubeloop.testing.oracles",
    "compare_operations": "kubeloop.testing.oracles",
    "nondeterministic_paths": "kubeloop.testing.oracles",
    "operations_from_log": "kubeloop.testing.oracles",
    "eventually_stable": "kubeloop.testing.oracles",
    "subset_mismatches": "kubeloop.testing.oracles",
    "live_mismatches": "kubeloop.testing.oracles",
    "assert_no_differences": "kubeloop.testing.oracles",
}


def __getattr__(name: str) -> Any:
    # the plugin module imports pytest; the helpers above do not need it
    if name == "NodeFactory":
        from kubeloop.testing.plugin import NodeFactory

        return NodeFactory
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

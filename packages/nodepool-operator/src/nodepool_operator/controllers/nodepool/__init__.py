"""The NodePool controller: a pool's VMs and Nodes converge to ``spec.targetNodes``.

Each reconcile is :mod:`.observe` (the reads, one frozen :class:`~.observe.Observation`),
:mod:`.decide` (pure: the plan, and each verdict a step needs) and :mod:`.act` (the writes and
cloud calls), wired by :mod:`.controller`; Nodes are read once into :class:`~.records.PoolNode`.

It never creates a Node: it launches VMs whose user data says how their kubelet registers
(:mod:`._userdata`: a nodeadm NodeConfig, Bottlerocket settings, or the simulated bootstrap),
adopts each Node that registers by its providerID (on EC2 it is named after the instance's
private DNS name, not the VM's), and from then on keeps the labels and taints the pool owns on
it in line with the spec (:mod:`._node_sync`), with its own finalizer on the Node. One pass
over a pool:

1. read it from the cache (scoped by ``settings.label_selector``); a pool being deleted
   drains its Nodes (:func:`._deletion.plan_deletion`, bounded by
   ``spec.disruption.terminationGracePeriod``), deletes each with its VM once drained,
   then its finalizer;
2. observe its VMs (one cloud ``list`` by the pool's uid tag; ``describe`` for recorded ids
   the list misses, since a list may lag), its Nodes and the pods bound to them (cache);
3. plan (pure): adopt VMs tagged for the pool that no record knows, up to the desired
   count; retire what must go (VM gone, Node deleted by someone, Node never registered
   within ``registration_timeout_seconds``, Node unhealthy past the repair toleration:
   :mod:`._repair`, one at a time, none while more than ``maxUnhealthyPercent`` of the
   pool is unhealthy) and the surplus (records with no Node yet first, then in
   :func:`~nodepool_operator.scheduling.removal_order`: empty Nodes, then the least
   utilised whose pods fit on the others, blocked Nodes last: :mod:`._blocked`); add
   intents for the missing. The surplus Nodes chosen are tainted
   ``kubeloop.dev/disrupting:NoSchedule`` at once, so nothing new lands on them. A Node
   chosen earlier that a blocker now holds is kept (untainted) when another Node can go
   instead, so one blocked drain does not hold the scale-down;
4. record that plan in ``status.instances``, in one status write, before any cloud call;
5. act: create the recorded intents (same idempotency token every time), terminate retired
   ones (:meth:`.act.Act._terminate`: drain through the Eviction API honouring
   PodDisruptionBudgets and do-not-disrupt pods (:mod:`._drain`), VM, Node, finalizer),
   a scale-down drain past ``spec.disruption.drainTimeout`` is given up, the Node untainted
   and kept (:mod:`._drain_deadline`), so the next pass removes another; a repair's drain
   past it goes on without the pods left (the kubelet is unreachable);
   start stopped VMs, adopt registered Nodes, and delete VMs tagged for the pool that no
   record knows after a grace period, and Nodes whose VM is gone;
6. write the status again (skipped when unchanged) and requeue while anything is in flight.

A crash anywhere repeats work, never duplicates it: intents are recorded before creates,
and retirements before removals. The controller writes ``status``, its finalizers, the
labels and taints it owns on the pool's Nodes and their drain-timed-out annotation, never
``spec`` (docs/ownership.md).
"""

from nodepool_operator.controllers.nodepool._budget import allowed_disruptions
from nodepool_operator.controllers.nodepool.controller import (
    FINALIZER,
    NAME,
    NODE_FINALIZER,
    NodePoolController,
)

# allowed_disruptions: the pool's disruption budgets, which the Autoscaler's consolidation
# names no more nodes than (one rule with the NodePool controller's cut of its removals)
__all__ = ["FINALIZER", "NAME", "NODE_FINALIZER", "NodePoolController", "allowed_disruptions"]

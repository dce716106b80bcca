"""Pure scheduling simulation for the autoscaler: no I/O, no clock, deterministic.

Reads pods as the API returns them, decides which ones should drive scale-up, checks them against a
pool's node template, and bin-packs them onto existing, booting and new nodes. Everything here is
a function of its arguments, so the autoscaler's decisions can be unit-tested and benchmarked
without a cluster (Karpenter keeps its scheduling simulation pure for the same reason).
"""

from ._binpack import PlanReason as PlanReason
from ._binpack import ScaleUpPlan as ScaleUpPlan
from ._binpack import UnschedulableGroup as UnschedulableGroup
from ._binpack import crowded_out as crowded_out
from ._binpack import lower_bound as lower_bound
from ._binpack import plan_scale_up as plan_scale_up
from ._blockers import DefaultBlockers as DefaultBlockers
from ._blockers import PdbView as PdbView
from ._blockers import Unremovable as Unremovable
from ._blockers import UnremovableReason as UnremovableReason
from ._blockers import held_by_budgets as held_by_budgets
from ._blockers import needs_budgets as needs_budgets
from ._blockers import node_blocker as node_blocker
from ._blockers import pdb_view as pdb_view
from ._blockers import pod_blocker as pod_blocker
from ._consolidate import Consolidation as Consolidation
from ._consolidate import Replacement as Replacement
from ._consolidate import consolidate as consolidate
from ._daemonset import DaemonSetView as DaemonSetView
from ._daemonset import daemonset_overhead as daemonset_overhead
from ._daemonset import daemonset_view as daemonset_view
from ._exact import SearchBudget as SearchBudget
from ._firstfit import NodeState as NodeState
from ._firstfit import Placement as Placement
from ._fit import FitReason as FitReason
from ._fit import FitResult as FitResult
from ._fit import pod_fits_node as pod_fits_node
from ._fit import pod_fits_template as pod_fits_template
from ._fit import tolerates as tolerates
from ._nominate import nomination_patch as nomination_patch
from ._pods import Pod as Pod
from ._pods import PodReason as PodReason
from ._pods import PodRef as PodRef
from ._pods import PodVerdict as PodVerdict
from ._pods import classify as classify
from ._pods import is_workload as is_workload
from ._pods import node_view as node_view
from ._pods import pod_ref as pod_ref
from ._pods import pod_requests as pod_requests
from ._pods import pod_view as pod_view
from ._pods import read_pending as read_pending
from ._pods import volume_zone_terms as volume_zone_terms
from ._pods import with_volume_zones as with_volume_zones
from ._quantity import Resources as Resources
from ._quantity import format_bytes as format_bytes
from ._quantity import format_cpu as format_cpu
from ._quantity import parse_bytes as parse_bytes
from ._quantity import parse_cpu as parse_cpu
from ._quantity import parse_quantity as parse_quantity
from ._scaledown import CHECK_BUDGET as CHECK_BUDGET
from ._scaledown import Disposal as Disposal
from ._scaledown import RemovalReason as RemovalReason
from ._scaledown import ScaleDownNode as ScaleDownNode
from ._scaledown import place_on as place_on
from ._scaledown import removal_order as removal_order
from ._slots import Booting as Booting
from ._slots import Existing as Existing
from ._slots import New as New
from ._slots import NodeSlot as NodeSlot
from ._template import DEFAULT_MAX_PODS as DEFAULT_MAX_PODS
from ._template import NodeShape as NodeShape
from ._template import NodeTemplate as NodeTemplate
from ._template import Taint as Taint
from ._template import node_shape as node_shape
from ._views import DO_NOT_DISRUPT as DO_NOT_DISRUPT
from ._views import ZONE_KEY as ZONE_KEY
from ._views import NodeSelectorTerm as NodeSelectorTerm
from ._views import NodeView as NodeView
from ._views import PodView as PodView
from ._views import References as References
from ._zones import zone_templates as zone_templates

__all__ = [  # noqa: RUF022 - plain sorted (a test checks it): Booting sorts before the constants
    "Booting",
    "CHECK_BUDGET",
    "Consolidation",
    "DEFAULT_MAX_PODS",
    "DO_NOT_DISRUPT",
    "DaemonSetView",
    "DefaultBlockers",
    "Disposal",
    "Existing",
    "FitReason",
    "FitResult",
    "New",
    "NodeSelectorTerm",
    "NodeShape",
    "NodeSlot",
    "NodeState",
    "NodeTemplate",
    "NodeView",
    "PdbView",
    "Placement",
    "PlanReason",
    "Pod",
    "PodReason",
    "PodRef",
    "PodVerdict",
    "PodView",
    "References",
    "RemovalReason",
    "Replacement",
    "Resources",
    "ScaleDownNode",
    "ScaleUpPlan",
    "SearchBudget",
    "Taint",
    "Unremovable",
    "UnremovableReason",
    "UnschedulableGroup",
    "ZONE_KEY",
    "classify",
    "consolidate",
    "crowded_out",
    "daemonset_overhead",
    "daemonset_view",
    "format_bytes",
    "format_cpu",
    "held_by_budgets",
    "is_workload",
    "lower_bound",
    "needs_budgets",
    "node_blocker",
    "node_shape",
    "node_view",
    "nomination_patch",
    "parse_bytes",
    "parse_cpu",
    "parse_quantity",
    "pdb_view",
    "place_on",
    "plan_scale_up",
    "pod_blocker",
    "pod_fits_node",
    "pod_fits_template",
    "pod_ref",
    "pod_requests",
    "pod_view",
    "read_pending",
    "removal_order",
    "tolerates",
    "volume_zone_terms",
    "with_volume_zones",
    "zone_templates",
]

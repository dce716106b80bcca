"""Pure scheduling simulation for the autoscaler: no I/O, no clock, deterministic.

Reads pods as the API returns them, decides which ones should drive scale-up, checks them against a
pool's node template, and bin-packs them onto existing, booting and new nodes. Everything here is
a function of its arguments, so the autoscaler's decisions can be unit-tested and benchmarked
without a cluster (Karpenter keeps its scheduling simulation pure for the same reason).
"""

from ._binpack import NodeState as NodeState
from ._binpack import Placement as Placement
from ._binpack import PlanReason as PlanReason
from ._binpack import ScaleUpPlan as ScaleUpPlan
from ._binpack import UnschedulableGroup as UnschedulableGroup
from ._binpack import lower_bound as lower_bound
from ._binpack import plan_scale_up as plan_scale_up
from ._exact import SearchBudget as SearchBudget
from ._fit import FitReason as FitReason
from ._fit import FitResult as FitResult
from ._fit import pod_fits_node as pod_fits_node
from ._fit import pod_fits_template as pod_fits_template
from ._fit import tolerates as tolerates
from ._pods import Pod as Pod
from ._pods import PodReason as PodReason
from ._pods import PodRef as PodRef
from ._pods import PodVerdict as PodVerdict
from ._pods import classify as classify
from ._pods import pod_ref as pod_ref
from ._pods import pod_requests as pod_requests
from ._quantity import Resources as Resources
from ._quantity import format_bytes as format_bytes
from ._quantity import format_cpu as format_cpu
from ._quantity import parse_bytes as parse_bytes
from ._quantity import parse_cpu as parse_cpu
from ._quantity import parse_quantity as parse_quantity
from ._template import DEFAULT_MAX_PODS as DEFAULT_MAX_PODS
from ._template import NodeTemplate as NodeTemplate
from ._template import Taint as Taint

__all__ = [
    "DEFAULT_MAX_PODS",
    "FitReason",
    "FitResult",
    "NodeState",
    "NodeTemplate",
    "Placement",
    "PlanReason",
    "Pod",
    "PodReason",
    "PodRef",
    "PodVerdict",
    "Resources",
    "ScaleUpPlan",
    "SearchBudget",
    "Taint",
    "UnschedulableGroup",
    "classify",
    "format_bytes",
    "format_cpu",
    "lower_bound",
    "parse_bytes",
    "parse_cpu",
    "parse_quantity",
    "plan_scale_up",
    "pod_fits_node",
    "pod_fits_template",
    "pod_ref",
    "pod_requests",
    "tolerates",
]

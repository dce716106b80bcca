"""AL2023's node bootstrap: the user data that nodeadm, on an EKS-optimized AL2023 AMI, reads
to join the kubelet to the cluster.

nodeadm takes a ``node.eks.aws/v1alpha1`` ``NodeConfig`` from the instance's user data, alone
or as ``application/node.eks.aws`` parts of a MIME multi-part document (other parts, such as
shell scripts, are cloud-init's); several NodeConfigs are merged in order, later values win,
kubelet flags are appended. The operator writes one NodeConfig with the cluster's coordinates
and the kubelet's settings (max pods, reservations, eviction threshold, and the pool's labels
and taints as ``--node-labels`` and ``--register-with-taints``, so the Node carries them when
it registers), and merges it with the node class's own user data the way Karpenter does: the
user's parts are kept, in order, and the operator's NodeConfig comes last, so what the
operator depends on (labels, taints, cluster) cannot be overridden by accident.

The output is deterministic (sorted keys, a fixed boundary): the same pool, type and class
give the same user data, so a repeated create with the same idempotency token matches.
"""

from __future__ import annotations

import email
import email.message
import email.policy
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from ._port import ClusterInfo, InstanceType

NODECONFIG_API_VERSION: Final = "node.eks.aws/v1alpha1"
NODECONFIG_KIND: Final = "NodeConfig"
#: The MIME type nodeadm reads its configuration from; every other part is left to cloud-init.
NODECONFIG_MEDIA_TYPE: Final = "application/node.eks.aws"
#: nodeadm's (and EKS's) default hard eviction thresholds, written out so that the kubelet's
#: allocatable can be computed from the user data alone.
DEFAULT_EVICTION_HARD: Final[Mapping[str, str]] = {
    "memory.available": "100Mi",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "5%",
}
_BOUNDARY: Final = "//"
_SHELL: Final = 'text/x-shellscript; charset="us-ascii"'
#: Label domains a kubelet may not set on itself (NodeRestriction), except the keys below.
_RESTRICTED_DOMAINS: Final = ("kubernetes.io", "k8s.io")
_SELF_SET_LABELS: Final = frozenset(
    {
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "topology.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region",
    }
)
_SELF_SET_DOMAINS: Final = ("kubelet.kubernetes.io", "node.kubernetes.io")


def kube_reserved(cpu_cores: int, max_pods: int) -> dict[str, str]:
    """EKS's kube-reserved for a node: CPU by cores (6% of the first, 1% of the second, 0.5%
    of the third and fourth, 0.25% of each further core), memory ``11 MiB * maxPods + 255
    MiB``, 1Gi of ephemeral storage. The one place this formula lives: the bootstrap writes
    it into the kubelet's config, and a node template must subtract the same amounts."""
    # in tenths of a millicore, so 0.25% of a core stays exact until the final rounding
    tenths = 0
    for core in range(1, cpu_cores + 1):
        tenths += 600 if core == 1 else 100 if core == 2 else 50 if core <= 4 else 25
    return {
        "cpu": f"{tenths // 10}m",
        "memory": f"{11 * max_pods + 255}Mi",
        "ephemeral-storage": "1Gi",
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeletSettings:
    """What the kubelet of a node of one type is configured with, beyond labels and taints."""

    max_pods: int
    kube_reserved: dict[str, str]
    system_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_EVICTION_HARD))

    def config(self) -> dict[str, Any]:
        """As KubeletConfiguration fields (what a NodeConfig's ``kubelet.config`` merges)."""
        out: dict[str, Any] = {
            "maxPods": self.max_pods,
            "kubeReserved": dict(self.kube_reserved),
            "evictionHard": dict(self.eviction_hard),
        }
        if self.system_reserved:
            out["systemReserved"] = dict(self.system_reserved)
        return out


def prefix_delegation_max_pods(instance_type: InstanceType) -> int:
    """Max pods when the VPC CNI assigns /28 prefixes (16 addresses) instead of single
    addresses: every secondary slot of every ENI holds 16 pods, capped as EKS's max-pods
    calculator caps it (110 up to 30 vCPUs, 250 above: the kubelet's tested limits). The
    type's ENI-limited count when its ENIs are unknown."""
    if not instance_type.enis or not instance_type.ips_per_eni:
        return instance_type.pods
    limit = 110 if instance_type.cpu_cores <= 30 else 250
    return min(instance_type.enis * ((instance_type.ips_per_eni - 1) * 16) + 2, limit)


def kubelet_settings(
    instance_type: InstanceType,
    *,
    max_pods: int | None = None,
    system_reserved: Mapping[str, str] | None = None,
    eni_limited_memory: bool = True,
    prefix_delegation: bool = False,
) -> KubeletSettings:
    """The kubelet settings of a node of ``instance_type``: the one function both the
    bootstrap and a node template take them from.

    ``max_pods`` overrides the type's count: ENI-limited, or with ``prefix_delegation``
    :func:`prefix_delegation_max_pods`. kube-reserved memory follows the ENI-limited count
    even then on AL2023 (``eni_limited_memory``, the default), the effective count on
    Bottlerocket (Karpenter's ``UsesENILimitedMemoryOverhead``)."""
    if max_pods is not None:
        pods = max_pods
    elif prefix_delegation:
        pods = prefix_delegation_max_pods(instance_type)
    else:
        pods = instance_type.pods
    return KubeletSettings(
        max_pods=pods,
        kube_reserved=kube_reserved(
            instance_type.cpu_cores, instance_type.pods if eni_limited_memory else pods
        ),
        system_reserved=dict(system_reserved or {}),
    )


def kubelet_may_set_label(key: str) -> bool:
    """Whether a kubelet may register its Node with label ``key`` (NodeRestriction: nothing
    under kubernetes.io or k8s.io but a few well-known keys). Others make the kubelet exit,
    so they are left to the NodePool controller, which sets them after registration."""
    prefix, _, _ = key.rpartition("/")
    if not prefix:
        return True
    if key in _SELF_SET_LABELS:
        return True
    if any(prefix == d or prefix.endswith("." + d) for d in _SELF_SET_DOMAINS):
        return True
    if prefix.startswith("node-restriction.kubernetes.io"):
        return False
    return not any(prefix == d or prefix.endswith("." + d) for d in _RESTRICTED_DOMAINS)


def node_labels_flag(labels: Mapping[str, str]) -> str:
    return "--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))


def register_taints_flag(taints: Sequence[Mapping[str, str]]) -> str:
    """``--register-with-taints=key=value:Effect,...`` (``key:Effect`` without a value)."""
    items = []
    for taint in taints:
        value = taint.get("value") or ""
        head = f"{taint['key']}={value}" if value else taint["key"]
        items.append(f"{head}:{taint['effect']}")
    return "--register-with-taints=" + ",".join(items)


def node_config(
    cluster: ClusterInfo,
    kubelet: KubeletSettings,
    *,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
) -> dict[str, Any]:
    """The operator's NodeConfig for one node. Labels a kubelet may not set on itself are
    left out (see :func:`kubelet_may_set_label`)."""
    flags = [node_labels_flag({k: v for k, v in labels.items() if kubelet_may_set_label(k)})]
    if taints:
        flags.append(register_taints_flag(taints))
    return {
        "apiVersion": NODECONFIG_API_VERSION,
        "kind": NODECONFIG_KIND,
        "spec": {
            "cluster": {
                "name": cluster.name,
                "apiServerEndpoint": cluster.endpoint,
                "certificateAuthority": cluster.certificate_authority,
                "cidr": cluster.service_cidr,
            },
            "kubelet": {"config": kubelet.config(), "flags": flags},
        },
    }


def al2023_user_data(config: Mapping[str, Any], user_data: str | None = None) -> str:
    """The MIME multi-part user data: the user's own parts, then ``config`` (the operator's
    NodeConfig) last. ``user_data`` may be a MIME multi-part document (its parts are kept
    as they are), a NodeConfig (one ``application/node.eks.aws`` part), or anything else
    (a shell script part, for cloud-init).

    Raises:
        ValueError: ``user_data`` claims to be MIME but is not a multi-part document.
    """
    parts = _user_parts(user_data) if user_data and user_data.strip() else []
    ours = yaml.safe_dump(dict(config), sort_keys=True, default_flow_style=False)
    parts.append(([f"Content-Type: {NODECONFIG_MEDIA_TYPE}"], ours))
    boundary = _boundary(parts)
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{boundary}"', ""]
    for headers, body in parts:
        lines += [f"--{boundary}", *headers, "", body.rstrip("\n"), ""]
    lines.append(f"--{boundary}--")
    return "\n".join(lines) + "\n"


def _user_parts(user_data: str) -> list[tuple[list[str], str]]:
    text = user_data.replace("\r\n", "\n")
    if text.startswith(("MIME-Version:", "Content-Type:")):
        message = email.message_from_string(text, policy=email.policy.compat32)
        if not message.is_multipart():
            raise ValueError("userData has MIME headers but is not a MIME multi-part document")
        parts: list[tuple[list[str], str]] = []
        for part in message.get_payload():
            if not isinstance(part, email.message.Message):
                raise ValueError("userData: a MIME part is not a message")
            headers = [f"{k}: {v}" for k, v in part.items()]
            parts.append((headers, str(part.get_payload())))
        return parts
    if _is_node_config(text):
        return [([f"Content-Type: {NODECONFIG_MEDIA_TYPE}"], text)]
    return [([f"Content-Type: {_SHELL}"], text)]


def _is_node_config(text: str) -> bool:
    """Whether ``text`` is a NodeConfig document (what nodeadm would take it for)."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return (
        isinstance(doc, dict)
        and doc.get("kind") == NODECONFIG_KIND
        and str(doc.get("apiVersion", "")).startswith("node.eks.aws/")
    )


def _boundary(parts: Sequence[tuple[list[str], str]]) -> str:
    """Karpenter's ``//`` unless a part holds that delimiter line; then one derived from the
    content (still deterministic)."""
    bodies = "\n".join(body for _, body in parts)
    boundary = _BOUNDARY
    while f"--{boundary}" in bodies:
        boundary = "==" + hashlib.sha256((boundary + bodies).encode()).hexdigest()[:24]
    return boundary

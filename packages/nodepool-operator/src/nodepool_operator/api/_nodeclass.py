"""AwsNodeClass: how an EC2 VM boots (AMI, network, identity, user data, tags), cluster-scoped
and shared by the NodePools and Instances that name it in ``spec.nodeClassRef``.

Validated at admission as far as the schema and CEL can express it (shapes of ids, sizes,
reserved tag keys, the user data's placeholders); whether an AMI or subnet exists only EC2
can say, and a refusal shows on the referencing object's conditions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Final, Literal

from kubeloop.crd import (
    CEL,
    ListSet,
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinItems,
    MinLength,
    ObjectMeta,
    Pattern,
    all_found_in,
    exactly_one_of,
    key_length,
    parse,
    reserved_keys,
    rules,
)

#: The placeholders a user data template may use, and nothing else: a typo fails admission.
USER_DATA_VARIABLES: Final = ("nodeName", "poolName", "instanceType")
#: EC2's limit on user data (before base64).
MAX_USER_DATA: Final = 16384
#: EC2 allows 50 tags per resource; the operator's own tags take up to 10 of them.
MAX_USER_TAGS: Final = 40
#: Tag keys users may not set: AWS's own prefix, the operator's, the cluster ownership tags
#: the operator sets from ``cluster.name`` (the IAM policy trusts them), and the VM's name.
RESERVED_TAG_PREFIXES: Final = ("aws:", "kubeloop.dev/", "kubernetes.io/cluster/")
RESERVED_TAG_KEYS: Final = ("Name", "eks:eks-cluster-name")

#: How the AMI bootstraps its kubelet, which decides what user data the operator writes.
AmiFamily = Literal["AL2023", "Bottlerocket", "Custom"]

_PLACEHOLDER = r"\$\{[^}]*\}"
_ALLOWED_PLACEHOLDERS = [f"${{{v}}}" for v in USER_DATA_VARIABLES]
_ONLY_KNOWN_PLACEHOLDERS = all_found_in(
    _PLACEHOLDER,
    _ALLOWED_PLACEHOLDERS,
    message="user data may only use the placeholders " + ", ".join(_ALLOWED_PLACEHOLDERS),
)
_NO_RESERVED_TAGS = reserved_keys(
    prefixes=RESERVED_TAG_PREFIXES,
    keys=RESERVED_TAG_KEYS,
    message=(
        "tag keys Name, eks:eks-cluster-name, aws:*, kubeloop.dev/* and "
        "kubernetes.io/cluster/* are reserved"
    ),
)
_TAG_KEY_LENGTH = key_length(1, 128, message="tag keys must be 1 to 128 characters long")


@dataclass(frozen=True, kw_only=True)
class EksCluster:
    """The EKS cluster the nodes join. Fields left out are read with EKS DescribeCluster
    (the operator then needs eks:DescribeCluster on the cluster)."""

    name: Annotated[str, MinLength(1), MaxLength(100), Pattern(r"^[0-9A-Za-z][A-Za-z0-9\-_]*$")]
    """The cluster's name."""
    endpoint: Annotated[str, MaxLength(2048), Pattern(r"^https://")] | None = None
    """The API server's URL. Omitted: DescribeCluster's."""
    certificate_authority: (
        Annotated[str, MaxLength(65536), Pattern(r"^[A-Za-z0-9+/=]+$")] | None
    ) = None
    """The cluster's CA bundle, base64-encoded. Omitted: DescribeCluster's."""
    service_cidr: Annotated[str, MaxLength(64), Pattern(r"^[0-9a-fA-F.:]+/[0-9]{1,3}$")] | None = (
        None
    )
    """The Service CIDR (nodeadm derives the cluster DNS address from it). Omitted:
    DescribeCluster's."""

    @property
    def complete(self) -> bool:
        """Whether nothing is left to discover."""
        return None not in (self.endpoint, self.certificate_authority, self.service_cidr)


@dataclass(frozen=True, kw_only=True)
class KubeletOptions:
    """Kubelet settings of the nodes beyond what the operator derives from the type."""

    max_pods: Annotated[int, Minimum(1), Maximum(1024)] | None = None
    """Pods per node. Omitted: the type's ENI limit (EKS's max pods), or with
    prefixDelegation the prefix count."""
    prefix_delegation: bool | None = None
    """The cluster's VPC CNI assigns /28 prefixes to ENIs (ENABLE_PREFIX_DELEGATION on the
    aws-node DaemonSet): max pods is then ENIs x (addresses per ENI - 1) x 16 + 2, at most
    110 (up to 30 vCPUs) or 250. Omitted: false, one address per pod."""
    system_reserved: Annotated[dict[str, Annotated[str, MaxLength(64)]], MaxProperties(8)] = field(
        default_factory=dict
    )
    """Resources reserved for the OS daemons, e.g. {cpu: 100m, memory: 100Mi}. Default none,
    as on EKS."""


#: EBS volume types a root volume may be.
VolumeType = Literal["gp3", "gp2", "io1", "io2"]
#: The root volume when a class gives none: Karpenter's for AL2023, and EKS's advice (gp3,
#: encrypted). Its size is the node's ephemeral-storage capacity.
DEFAULT_ROOT_VOLUME_GIB: Final = 20
#: Where each family's kubelet keeps its files (Bottlerocket: its data volume, the second).
DEFAULT_ROOT_DEVICE: Final[Mapping[str, str]] = {
    "AL2023": "/dev/xvda",
    "Bottlerocket": "/dev/xvdb",
    "Custom": "/dev/xvda",
}


@dataclass(frozen=True, kw_only=True)
class RootVolumeSpec:
    """The EBS volume the kubelet keeps its files and the pods' ephemeral storage on."""

    size_gib: Annotated[int, Minimum(4), Maximum(16384)] = DEFAULT_ROOT_VOLUME_GIB
    """Size in GiB (the node's ephemeral-storage capacity). Default 20."""
    volume_type: VolumeType = "gp3"
    """EBS volume type. Default gp3."""
    encrypted: bool = True
    """Encrypted with the account's default EBS key. Default true."""
    device_name: Annotated[str, Pattern(r"^/dev/[a-z0-9]+$")] | None = None
    """The device it is mapped to. Default: /dev/xvda (AL2023, Custom), /dev/xvdb
    (Bottlerocket's data volume)."""


#: Karpenter's limit on selector terms per field.
MAX_SELECTOR_TERMS: Final = 30
_SUBNET_ID = r"^subnet-[0-9a-f]{8,17}$"
_GROUP_ID = r"^sg-[0-9a-f]{8,17}$"
#: A selector's tags: every one must match (``"*"``: any value of that key).
SelectorTags = Annotated[
    dict[str, Annotated[str, MaxLength(256)]],
    MaxProperties(20),
    _TAG_KEY_LENGTH,
]


@rules(exactly_one_of("tags", "id"))
@dataclass(frozen=True, kw_only=True)
class SubnetSelectorTerm:
    """One way to find subnets (Karpenter's subnetSelectorTerms entry): by tags or by id."""

    tags: SelectorTags | None = None
    """Subnets carrying every one of these tags ("*" as a value: the key with any value);
    at least one tag."""
    id: Annotated[str, Pattern(_SUBNET_ID)] | None = None
    """One subnet by id, e.g. subnet-0abc1234."""


@rules(exactly_one_of("tags", "id", "name"))
@dataclass(frozen=True, kw_only=True)
class SecurityGroupSelectorTerm:
    """One way to find security groups (Karpenter's securityGroupSelectorTerms entry): by
    tags, by id or by name."""

    tags: SelectorTags | None = None
    """Groups carrying every one of these tags ("*" as a value: the key with any value)."""
    id: Annotated[str, Pattern(_GROUP_ID)] | None = None
    """One group by id, e.g. sg-0abc1234."""
    name: Annotated[str, MinLength(1), MaxLength(255)] | None = None
    """Groups of this name (group-name)."""


def _one_way(ids: str, terms: str) -> CEL:
    """A class rule: a list of ids or a list of selector terms, not both (either may be
    left out: the default network)."""

    def both(obj: Any) -> bool:
        return bool(getattr(obj, attribute_of(ids))) and bool(getattr(obj, attribute_of(terms)))

    return CEL(
        f"!(has(self.{ids}) && self.{ids}.size() > 0 && has(self.{terms}) && "
        f"self.{terms}.size() > 0)",
        f"{terms}: set {ids} or {terms}, not both",
        field_path=f".{terms}",
        check=lambda obj: not both(obj),
    )


def attribute_of(json_name: str) -> str:
    """The Python attribute of a camelCase JSON field name (subnetIds -> subnet_ids)."""
    return re.sub(r"[A-Z]", lambda m: "_" + m.group(0).lower(), json_name)


@rules(
    exactly_one_of("amiId", "amiSsmParameter"),
    _one_way("subnetIds", "subnetSelectorTerms"),
    _one_way("securityGroupIds", "securityGroupSelectorTerms"),
)
@dataclass(frozen=True, kw_only=True)
class AwsNodeClassSpec:
    """AwsNodeClassSpec is how EC2 VMs of the referencing pools and instances boot."""

    ami_id: Annotated[str, Pattern(r"^ami-[0-9a-f]{8,17}$")] | None = None
    """The AMI to boot, e.g. ami-0abcdef1234567890. Exactly one of amiId and
    amiSsmParameter."""
    ami_ssm_parameter: (
        Annotated[str, MinLength(2), MaxLength(1011), Pattern(r"^/[A-Za-z0-9_.\-/]+$")] | None
    ) = None
    """An SSM parameter holding the AMI id, read at each launch, e.g.
    /aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id."""
    ami_family: AmiFamily = "AL2023"
    """How the AMI bootstraps the kubelet. AL2023: the operator writes a nodeadm NodeConfig
    (cluster, max pods, reservations, the pool's labels and taints) as a MIME part after
    the parts of userData. Bottlerocket: the same as TOML settings.kubernetes, merged into
    userData's TOML. Custom: userData is sent as it is (placeholders filled in) and must
    join the node itself."""
    cluster: EksCluster | None = None
    """The EKS cluster the nodes join; a NodePool naming an AL2023 or Bottlerocket class
    needs it (an Instance, which is no node, does not). Every VM of a class that names it is
    tagged kubernetes.io/cluster/<name>: owned and eks:eks-cluster-name: <name> at launch,
    which the operator's least IAM policy requires to launch, stop, start or terminate it."""
    kubelet: KubeletOptions | None = None
    """Kubelet settings (AL2023, Bottlerocket)."""
    root_volume: RootVolumeSpec | None = None
    """The root volume each VM is launched with (a block device mapping). Omitted: 20 GiB,
    gp3, encrypted. Its size is what the pool's node template offers as ephemeral-storage."""
    subnet_ids: Annotated[list[Annotated[str, Pattern(_SUBNET_ID)]], MaxItems(16), ListSet()] = (
        field(default_factory=list)
    )
    """Subnets to launch into, by id; each VM gets one, in the zone the pool chose for it
    (the subnet with most free addresses there). At most one of subnetIds and
    subnetSelectorTerms; neither: the region's default subnets."""
    subnet_selector_terms: Annotated[
        list[SubnetSelectorTerm], MinItems(1), MaxItems(MAX_SELECTOR_TERMS)
    ] = field(default_factory=list)
    """Subnets to launch into, found by tags or id (Karpenter's subnetSelectorTerms): the
    union of what the terms match, read with DescribeSubnets (cached for a minute). Their
    zones are the zones the pool launches into."""
    security_group_ids: Annotated[
        list[Annotated[str, Pattern(_GROUP_ID)]], MaxItems(5), ListSet()
    ] = field(default_factory=list)
    """Security groups of the VM's network interface, by id. At most one of
    securityGroupIds and securityGroupSelectorTerms; neither: the VPC's default group."""
    security_group_selector_terms: Annotated[
        list[SecurityGroupSelectorTerm], MinItems(1), MaxItems(MAX_SELECTOR_TERMS)
    ] = field(default_factory=list)
    """Security groups found by tags, id or name (Karpenter's securityGroupSelectorTerms):
    the union of what the terms match, read with DescribeSecurityGroups."""
    instance_profile: (
        Annotated[str, MinLength(1), MaxLength(2048), Pattern(r"^[\w+=,.@:/-]+$")] | None
    ) = None
    """The IAM instance profile the VM runs as, by name or ARN (its role is what the
    kubelet uses to join). The operator needs iam:PassRole on its role."""
    user_data: Annotated[str, MaxLength(MAX_USER_DATA), _ONLY_KNOWN_PLACEHOLDERS] | None = None
    """User data; ${nodeName} (the VM's name), ${poolName} and ${instanceType} are replaced
    per VM. With AL2023 it is merged with the operator's NodeConfig: a MIME multi-part
    document keeps its parts, a NodeConfig becomes one part (the operator's comes after it,
    so its cluster, labels and taints win), anything else a shell script part. With
    Bottlerocket it is TOML settings, the operator's settings.kubernetes merged in. With Custom
    it is the whole user data and must join the node with the pool's labels and taints
    itself."""
    tags: Annotated[
        dict[str, Annotated[str, MaxLength(256)]],
        MaxProperties(MAX_USER_TAGS),
        _TAG_KEY_LENGTH,
        _NO_RESERVED_TAGS,
    ] = field(default_factory=dict)
    """Extra tags on every VM and its volumes. Name, eks:eks-cluster-name, aws:*,
    kubeloop.dev/* and kubernetes.io/cluster/* are reserved: with cluster set, the operator
    tags each VM kubernetes.io/cluster/<name>: owned and eks:eks-cluster-name: <name>."""

    @property
    def root(self) -> RootVolumeSpec:
        """The root volume, the default one if none is given."""
        return self.root_volume if self.root_volume is not None else RootVolumeSpec()

    @property
    def root_device(self) -> str:
        """The root volume's device, the family's default if none is given."""
        return self.root.device_name or DEFAULT_ROOT_DEVICE[self.ami_family]

    @property
    def image(self) -> str:
        """The image as the cloud port takes it: an AMI id, or EC2's resolve:ssm: form."""
        if self.ami_id is not None:
            return self.ami_id
        return f"resolve:ssm:{self.ami_ssm_parameter}"

    def render_user_data(self, *, node_name: str, pool_name: str, instance_type: str) -> str | None:
        """The user data with its placeholders filled in (the same every time)."""
        if self.user_data is None:
            return None
        values = {"nodeName": node_name, "poolName": pool_name, "instanceType": instance_type}
        return re.sub(
            r"\$\{(nodeName|poolName|instanceType)\}",
            lambda m: values[m.group(1)],
            self.user_data,
        )


@dataclass(frozen=True, kw_only=True)
class AwsNodeClass:
    """AwsNodeClass is how EC2 VMs boot; NodePools and Instances name it in
    spec.nodeClassRef."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: AwsNodeClassSpec
    """The launch settings."""


@dataclass(frozen=True, kw_only=True)
class NodeClassRef:
    """A reference to an AwsNodeClass (cluster-scoped, so by name only)."""

    name: Annotated[str, MinLength(1), MaxLength(253)]
    """The AwsNodeClass's name."""


def parse_nodeclass(obj: Mapping[str, Any]) -> AwsNodeClass:
    """An AwsNodeClass from its API object.

    Raises:
        InvalidField: the object breaks the schema; its ``path`` names the field.
    """
    return parse(AwsNodeClass, obj)

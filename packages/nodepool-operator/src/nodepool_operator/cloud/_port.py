"""The cloud as a port: what the operator may ask of a VM provider, and how that can fail.

Shaped after Karpenter's ``pkg/cloudprovider/types.go``: domain types in and out, never
an SDK's, and every failure mode is an exception type, so a caller's retry policy is a
plain ``except`` clause rather than string matching.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Final, Literal, Protocol

InstanceState = Literal["pending", "running", "stopped", "terminated"]
"""``pending`` until booted, then ``running``; ``stopped`` by a stop; ``terminated`` is final."""
MarketType = Literal["on-demand", "spot"]
"""How a VM is bought: on-demand, or spot (cheaper; the cloud may take it back at short
notice, an interruption)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InstanceType:
    """One entry of the provider's catalogue: what a node of this type can hold."""

    name: str
    cpu_cores: int
    memory_bytes: int
    disk_bytes: int
    pods: int
    """How many pods the kubelet on this type may run (EC2's ENI-derived max-pods)."""
    architecture: str = "amd64"
    """The CPU architecture as Kubernetes names it (``kubernetes.io/arch``): amd64, arm64."""
    enis: int = 0
    """Network interfaces the type takes (0: unknown); with ``ips_per_eni``, what max pods
    with VPC CNI prefix delegation is computed from."""
    ips_per_eni: int = 0
    """IPv4 addresses per network interface (0: unknown)."""
    gpus: int = 0
    """NVIDIA GPUs (EC2's ``GpuInfo``): what the NVIDIA device plugin advertises on the node
    as ``nvidia.com/gpu``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Subnet:
    """A subnet VMs may be launched into: the zone a VM there is in, and how many more
    addresses it has (EC2's ``AvailableIpAddressCount``)."""

    id: str
    zone: str
    free_addresses: int


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectorTerm:
    """One term of a subnet or security group selector (Karpenter's selector terms): by
    ``id``, by ``name`` (groups only), or by ``tags``, all of which must match (``"*"``: the
    key with any value). A selector's terms are ORed."""

    tags: tuple[tuple[str, str], ...] = ()
    id: str = ""
    name: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterInfo:
    """The coordinates a node needs to join its cluster (EKS ``DescribeCluster``)."""

    name: str
    endpoint: str
    """The API server's URL."""
    certificate_authority: str
    """The cluster's CA bundle, base64-encoded (as DescribeCluster returns it)."""
    service_cidr: str
    """The Service CIDR; nodeadm derives the cluster DNS address from it."""


#: The extended resource the NVIDIA device plugin advertises, one per GPU
#: (:attr:`InstanceType.gpus`).
NVIDIA_GPU: Final = "nvidia.com/gpu"

#: EC2's limit on a ClientToken; every provider holds tokens to it, so one intent's token
#: works against any of them.
MAX_TOKEN_LENGTH = 64


@dataclass(frozen=True, slots=True, kw_only=True)
class RootVolume:
    """The VM's root volume (EC2: a block device mapping), which is the kubelet's nodefs: its
    size is the node's ephemeral-storage capacity."""

    device_name: str
    """Where the AMI boots from, e.g. ``/dev/xvda``."""
    size_bytes: int
    volume_type: str = "gp3"
    encrypted: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSettings:
    """Where a VM boots and as whom, beyond its type, image and user data (an
    ``AwsNodeClass``'s fields).

    Part of the intent like the rest of :class:`CreateRequest`: a provider sends them in the
    create call itself. A provider without networks (the simulated cloud) ignores them.
    """

    subnets: tuple[str, ...] = ()
    """Subnets to launch into: the NodePool controller sends the one it chose; given
    several, a provider picks one per VM, the same one for every repeat of a request.
    Empty: the provider's default network."""
    security_groups: tuple[str, ...] = ()
    """Security groups of the VM's network interface. Empty: the network's default."""
    instance_profile: str | None = None
    """The IAM instance profile (name or ARN) the VM runs as; None for none."""
    root_volume: RootVolume | None = None
    """The root volume to launch with; None: the image's own."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateRequest:
    """Everything needed to launch one VM, decided *before* the call and recorded as intent.

    The same request with the same ``idempotency_token`` may be sent any number of times
    (after a crash, a timeout, a lost response) and yields one VM: that is what makes a
    crash between the cloud call and the status write harmless (CAPA #5794, #6131).
    """

    name: str
    """Deterministic, e.g. ``<pool>-<index>``; the cloud does not enforce uniqueness."""
    instance_type: str
    image: str
    idempotency_token: str
    """Stable per intended VM, e.g. a hash of the claim's UID. Required, printable ASCII, at
    most :data:`MAX_TOKEN_LENGTH` characters; a repeat returns the same VM."""
    tags: dict[str, str] = field(default_factory=dict)
    """Set in the create call itself, never by a later tagging call that could fail alone."""
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    """Network, identity and boot script; default: the provider's defaults."""
    user_data: str = ""
    """Opaque to the cloud, read by the VM at boot (EC2's UserData): how its kubelet joins
    the cluster (see :class:`~nodepool_operator.cloud.NodeBootstrap`). Default empty."""
    capacity_type: MarketType = "on-demand"
    """The market to launch in (EC2: spot through ``InstanceMarketOptions``, one-time,
    terminated on interruption). A provider with no spot capacity for the type refuses
    with :class:`CapacityUnavailable` naming ``spot``; it never falls back by itself."""
    zone: str = ""
    """The zone to launch in, chosen with its subnet (:attr:`LaunchSettings.subnets`);
    empty: the provider's choice. A provider whose subnets are zonal reads the zone from the
    subnet; one without subnets (the simulated cloud) from here."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Instance:
    """A VM as the provider reports it. Times are seconds since the epoch (the cloud's clock)."""

    id: str
    name: str
    instance_type: str
    image: str
    state: InstanceState
    private_ip: str
    public_ip: str | None
    """None unless pending or running: like EC2, a stopped VM gives up its public address."""
    tags: dict[str, str]
    created_at: float
    launched_at: float | None
    """When it last became running; None if it never has."""
    user_data: str = ""
    """What the VM was launched with (:attr:`CreateRequest.user_data`)."""
    image_id: str = ""
    """The image it booted as the cloud resolved :attr:`image` at its launch (EC2: its
    ImageId, an SSM parameter's value then); "" when the cloud does not say."""
    capacity_type: MarketType = "on-demand"
    """The market it was launched in (EC2: ``InstanceLifecycle`` ``spot``)."""
    zone: str = ""
    """The zone the VM runs in (EC2's ``Placement.AvailabilityZone``); empty when the
    provider has no zones."""


class CloudProvider(Protocol):
    """A VM provider. Every method may also raise :class:`TransientCloudError`."""

    async def create(self, request: CreateRequest) -> Instance:
        """Launch a VM, or return the one already launched with this idempotency token.

        A repeat returns that VM in whatever state it is now, even ``terminated``: the
        token names one VM for good, so a lost VM is replaced under a *new* token.

        Raises:
            InvalidRequest: unknown instance type, missing or over-long token, or the token
                was used with different arguments (:class:`IdempotencyMismatch`).
            QuotaExceeded: the account may not hold another VM.
            CapacityUnavailable: no capacity for this instance type right now.
            PermissionDenied: the provider's credentials may not launch this VM.
        """
        ...

    async def find(self, idempotency_token: str) -> Instance | None:
        """The VM launched with this idempotency token (terminated included), or None if no
        create with it ever took effect. Exact, unlike :meth:`list` (EC2: DescribeInstances
        with the ``client-token`` filter). Launches nothing: this is how an intent whose
        create may or may not have happened is resolved without risking a new VM.
        """
        ...

    async def delete(self, instance_id: str) -> None:
        """Terminate a VM. Idempotent: a missing or already terminated VM is not an error."""
        ...

    async def describe(self, instance_id: str) -> Instance:
        """The VM's current state; terminated VMs are still described, as ``terminated``.

        Raises:
            InstanceNotFound: no VM has ever had this id.
        """
        ...

    async def list(self, tags: dict[str, str]) -> builtins.list[Instance]:
        """Non-terminated VMs whose tags include all of ``tags`` (``{}`` matches all).

        May be eventually consistent: a VM created moments ago can be missing, so never
        decide to create from this list; the idempotency token decides.
        """
        ...

    async def start(self, instance_id: str) -> None:
        """Boot a stopped VM; a pending or running one is left alone.

        Raises:
            InstanceNotFound: no VM has ever had this id.
            InvalidRequest: the VM is terminated.
        """
        ...

    async def stop(self, instance_id: str) -> None:
        """Stop a pending or running VM; a stopped one is left alone.

        Raises:
            InstanceNotFound: no VM has ever had this id.
            InvalidRequest: the VM is terminated.
        """
        ...

    async def instance_types(self) -> builtins.list[InstanceType]:
        """The catalogue of instance types this provider can launch."""
        ...

    async def resolve_image(self, image: str) -> str:
        """The image id a create with ``image`` would boot now (EC2: the value of a
        ``resolve:ssm:`` parameter, an AMI id as it is), for drift: one call per image and
        period, never one per VM.

        Raises:
            InvalidRequest: the parameter holds no image id (reason ``InvalidAMI``).
        """
        ...

    async def subnets(self, terms: Sequence[SelectorTerm]) -> builtins.list[Subnet]:
        """The subnets ``terms`` select (their union, by id), or with no terms the default
        network's (one per zone); empty when the provider has no zones to choose from.
        Fresh on every call: callers cache it.

        Raises:
            PermissionDenied: the credentials may not describe subnets.
        """
        ...

    async def security_groups(self, terms: Sequence[SelectorTerm]) -> builtins.list[str]:
        """The ids of the security groups ``terms`` select (their union, sorted)."""
        ...

    @property
    def region(self) -> str:
        """The region VMs launch in (a Node's ``topology.kubernetes.io/region``)."""
        ...

    async def describe_cluster(self, name: str) -> ClusterInfo:
        """The coordinates of the Kubernetes cluster ``name`` that nodes join (EKS:
        DescribeCluster). May be cached by the provider.

        Raises:
            InvalidRequest: no cluster of that name.
            PermissionDenied: the credentials may not describe it.
        """
        ...


class CloudError(Exception):
    """Base of every failure a :class:`CloudProvider` reports.

    Attributes:
        retryable: whether trying again with the caller's usual backoff may succeed.
        retry_after: the least wait in seconds the provider suggests before trying again,
            or None to leave it to the caller's backoff. Each subclass documents its default.
    """

    retryable: ClassVar[bool] = False
    default_retry_after: ClassVar[float | None] = None

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = self.default_retry_after if retry_after is None else retry_after


class LaunchRefused(CloudError):
    """A launch the cloud refused for the offering asked for, not for the request itself:
    another instance type (or zone) may launch at once.

    Attributes:
        instance_type: the type refused, when the refusal is the type's own (no capacity,
            the type's instance limit); None when it is not said or not the type's (an
            account-wide quota).
        zone: the zone it is refused in, when the cloud named one; None otherwise.
        capacity_type: the market the launch asked for (a spot refusal leaves on-demand
            open).
    """

    def __init__(
        self,
        message: str,
        *,
        instance_type: str | None = None,
        zone: str | None = None,
        capacity_type: MarketType = "on-demand",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.instance_type = instance_type
        self.zone = zone
        self.capacity_type: MarketType = capacity_type


class QuotaExceeded(LaunchRefused):
    """The account is at its limit of VMs. Not retryable soon: nothing changes until a VM
    is deleted or the quota is raised, so report it (e.g. ``Ready=False``,
    ``CloudQuotaExceeded``), leave existing VMs alone, and look again after
    ``retry_after`` (default 300 s) instead of a retry storm.
    """

    default_retry_after: ClassVar[float | None] = 300.0


class PermissionDenied(CloudError):
    """The credentials may not make this call (EC2's ``UnauthorizedOperation``). Not the
    spec's fault and not fixed by retrying soon: someone must change a policy. Report it
    (``CloudPermissionDenied``) and look again after ``retry_after`` (default 300 s).
    """

    default_retry_after: ClassVar[float | None] = 300.0


class CapacityUnavailable(LaunchRefused):
    """No capacity for this instance type right now (in the zone named, if any).
    Retryable with backoff (default ``retry_after`` 30 s), or at once with another instance
    type or zone.
    """

    retryable: ClassVar[bool] = True
    default_retry_after: ClassVar[float | None] = 30.0


class SubnetFull(CapacityUnavailable):
    """The subnet the VM was sent to has no free address left (EC2's
    ``InsufficientFreeAddressesInSubnet``): another subnet may launch the same type at once.

    Attributes:
        subnet: the subnet that is full, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        subnet: str | None = None,
        zone: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, zone=zone, retry_after=retry_after)
        self.subnet = subnet


class InstanceNotFound(CloudError):
    """No VM has this id. If the operator recorded the id, the VM is gone: mark its claim
    failed and replace it through a new claim, never re-create under the old one
    (CAPA #1351).
    """

    def __init__(
        self, message: str, *, instance_id: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.instance_id = instance_id


class TransientCloudError(CloudError):
    """Throttling, a 5xx, a timeout: retry with the caller's exponential backoff. The call
    may or may not have taken effect, which is why creates carry an idempotency token.
    """

    retryable: ClassVar[bool] = True


class InvalidRequest(CloudError):
    """Terminal: the request can never succeed as sent (e.g. an unknown instance type).
    Report it on the object and make no further calls until its spec (or the node class it
    names) changes.

    Attributes:
        reason: what is wrong, as a condition's reason names it (``InvalidInstanceType``,
            ``InvalidAMI``, ``InvalidSubnet``, ``InvalidSecurityGroup``,
            ``InvalidInstanceProfile``, ``InvalidUserData``, ``InvalidKeyPair``,
            ``InvalidParameter``...).
        retry_after: None, except for a refusal known to clear by itself (an instance
            profile IAM has not yet propagated to EC2): then the wait before asking again.
    """

    def __init__(
        self, message: str, *, reason: str = "InvalidRequest", retry_after: float | None = None
    ) -> None:
        super().__init__(message, retry_after=retry_after)
        self.reason = reason


class IdempotencyMismatch(InvalidRequest):
    """The idempotency token was already used with different arguments (EC2's
    ``IdempotentParameterMismatch``): the intent recorded for this VM changed, a bug.
    """

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message, reason="IdempotencyMismatch", retry_after=retry_after)


def check_request(request: CreateRequest) -> None:
    """Refuse a request no provider may accept, the same way in every provider.

    Raises:
        InvalidRequest: no name, or no token, or a token that is not printable ASCII of at
            most :data:`MAX_TOKEN_LENGTH` characters.
    """
    token = request.idempotency_token
    if not token:
        # A create without a token is how controllers duplicate VMs; refuse it.
        raise InvalidRequest("create needs an idempotency_token")
    if len(token) > MAX_TOKEN_LENGTH or not (token.isascii() and token.isprintable()):
        raise InvalidRequest(
            f"idempotency_token must be printable ASCII of at most {MAX_TOKEN_LENGTH} "
            f"characters, got {len(token)}: {token[:80]!r}"
        )
    if not request.name:
        raise InvalidRequest("create needs a name")

"""AwsCloud: the :class:`CloudProvider` port on EC2, through aiobotocore.

Credentials and region come from botocore's standard chain (environment, shared config and
profiles, IRSA's web identity token, container and instance metadata); nothing here reads a
key. ``endpoint_url`` points it at another EC2 API server, such as moto's on loopback.

How the port's promises are kept on EC2:

- **Idempotency.** Every RunInstances carries ``ClientToken`` (the intent's token, at most 64
  characters) and the same arguments on every repeat (the subnet is picked from the token,
  not at random). EC2 answers a repeat with the same instance, ``IdempotentParameterMismatch``
  when the arguments differ, and ``IdempotentInstanceTerminated`` once that instance is gone.
  The token is also a tag (``kubeloop.dev/launch-token``), looked up before launching: that
  finds a terminated token's VM to return (the port says a repeat returns the VM in whatever
  state), and it is what keeps a repeat from launching twice on servers that ignore
  ``ClientToken`` (moto's, as of 5.2.5: checked, it launches a second instance).
- **Tags** are set through ``TagSpecifications`` in the launch itself (the instance and its
  volumes), never by a later CreateTags that could fail alone.
- **Eventual consistency.** DescribeInstances may not know an instance for a while after
  RunInstances returned it. A NotFound for an id this object launched less than
  ``consistency_seconds`` ago is a :class:`TransientCloudError` (retried by the caller's
  backoff), never :class:`InstanceNotFound`, which would read as "the VM is gone".
- **Errors** become the port's typed errors in :mod:`._aws_errors`. The SDK's own retries are
  off (one attempt): the caller's backoff is the one retry policy.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

from botocore.exceptions import BotoCoreError, ClientError, ProfileNotFound

from ._aws_errors import TOKEN_TERMINATED_CODE, error_code, translate
from ._catalogue import GiB
from ._port import (
    ClusterInfo,
    CreateRequest,
    IdempotencyMismatch,
    Instance,
    InstanceNotFound,
    InstanceState,
    InstanceType,
    InvalidRequest,
    SelectorTerm,
    Subnet,
    TransientCloudError,
    check_request,
)
from ._simulated import CloudSnapshot

if TYPE_CHECKING:
    from aiobotocore.config import AioConfig
    from aiobotocore.session import AioSession
    from types_aiobotocore_ec2 import EC2Client
    from types_aiobotocore_ec2.type_defs import (
        FilterTypeDef,
        InstanceTypeDef,
        InstanceTypeInfoTypeDef,
        RunInstancesRequestTypeDef,
        TagSpecificationTypeDef,
    )
    from types_aiobotocore_eks import EKSClient
    from types_aiobotocore_ssm import SSMClient

#: The VM's name, as the EC2 console shows it.
NAME_TAG: Final = "Name"
#: The create's idempotency token, so a repeat finds the VM even where ClientToken is ignored.
TOKEN_TAG: Final = "kubeloop.dev/launch-token"
#: The image as asked (an AMI id or ``resolve:ssm:<parameter>``), reported as ``image``.
IMAGE_TAG: Final = "kubeloop.dev/image"
#: A hash of the launch settings, so a repeat with other settings is a mismatch.
LAUNCH_TAG: Final = "kubeloop.dev/launch-hash"
#: Tags this module writes for itself; a VM's reported ``tags`` leave them out.
#: On a spot VM: its market, for servers whose DescribeInstances omits ``InstanceLifecycle``.
MARKET_TAG: Final = "kubeloop.dev/capacity-type"
BOOKKEEPING_TAGS: Final = frozenset({NAME_TAG, TOKEN_TAG, IMAGE_TAG, LAUNCH_TAG, MARKET_TAG})
#: The tag that says a resource belongs to a Kubernetes cluster (``<prefix><cluster>: owned``):
#: the cloud controller manager's convention, and what the IAM policy's terminate, stop and
#: start are conditioned on (config/iam).
CLUSTER_TAG_PREFIX: Final = "kubernetes.io/cluster/"
#: EKS's tag naming the cluster a node belongs to (the console groups nodes by it).
EKS_CLUSTER_TAG: Final = "eks:eks-cluster-name"
#: EC2's own notation for "the AMI id in this SSM parameter" (RunInstances accepts it too).
SSM_IMAGE_PREFIX: Final = "resolve:ssm:"

#: How long after launching an id its NotFound means "not visible yet" rather than "gone".
DEFAULT_CONSISTENCY_SECONDS: Final = 120.0
#: How long DescribeCluster's answer is reused (a cluster's endpoint and CA rarely change).
CLUSTER_TTL_SECONDS: Final = 3600.0
#: How long the catalogue from DescribeInstanceTypes is reused.
CATALOGUE_TTL_SECONDS: Final = 3600.0
#: Root disk assumed for EBS-only types: the AMI decides it, and disk is not scaled on.
_ROOT_DISK = 100 * GiB
_MIB = 1024**2
_LIVE_STATES: Final = ("pending", "running", "stopping", "stopped")
_BY_EC2_STATE: Final[dict[str, InstanceState]] = {
    "pending": "pending",
    "running": "running",
    # not serving: the port's states have no "on its way down"
    "stopping": "stopped",
    "stopped": "stopped",
    "shutting-down": "terminated",
    "terminated": "terminated",
}
#: EC2's architecture names as Kubernetes' ``kubernetes.io/arch`` has them.
_ARCHITECTURES: Final = {"x86_64": "amd64", "arm64": "arm64", "i386": "386"}
# DescribeInstanceTypes takes at most 100 names per call.
_TYPES_PER_CALL = 100


def cluster_tags(cluster_name: str) -> dict[str, str]:
    """The tags that make a VM (and its volumes) the EKS cluster's: set at launch on every VM
    of a node class naming the cluster, and required by the IAM policy to launch one and,
    later, to terminate, stop or start it."""
    return {f"{CLUSTER_TAG_PREFIX}{cluster_name}": "owned", EKS_CLUSTER_TAG: cluster_name}


def max_pods(enis: int, ips_per_eni: int) -> int:
    """EKS's ENI-based max pods: each ENI's secondary IPs, plus host-network pods."""
    return enis * (ips_per_eni - 1) + 2


class AwsCloud:
    """A :class:`CloudProvider` backed by EC2 (and SSM for ``resolve:ssm:`` images).

    Use as ``async with AwsCloud(...) as cloud``: the clients' connections close on exit.

    Args:
        region: the AWS region; None: the standard chain's (``AWS_REGION``, the profile...).
        profile: a shared-config profile; None: the standard chain's (``AWS_PROFILE``...).
        endpoint_url: another EC2 (and SSM) API server, e.g. moto's on loopback; None: AWS.
        instance_types: offer only these types (fewer DescribeInstanceTypes pages); None:
            every type the region has.
        page_size: DescribeInstances page size for ``list`` (5 to 1000). Default 1000.
        consistency_seconds: see the module docstring. Default 120.
        clock: monotonic seconds, for the consistency window. Default ``time.monotonic``.
    """

    def __init__(
        self,
        *,
        region: str | None = None,
        profile: str | None = None,
        endpoint_url: str | None = None,
        instance_types: Sequence[str] | None = None,
        page_size: int = 1000,
        consistency_seconds: float = DEFAULT_CONSISTENCY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not 5 <= page_size <= 1000:
            raise ValueError(f"page_size must be in [5, 1000], got {page_size}")
        self._session = aws_session(profile)
        self._region = region or _chain_region(self._session)
        self._endpoint_url = endpoint_url
        self._offered = tuple(instance_types) if instance_types is not None else None
        self._page_size = page_size
        self._consistency = consistency_seconds
        self._clock = clock
        self._launched: dict[str, float] = {}
        self._catalogue: tuple[float, builtins.list[InstanceType]] | None = None
        self._stack = contextlib.AsyncExitStack()
        self._ec2: EC2Client | None = None
        self._ssm: SSMClient | None = None
        self._eks: EKSClient | None = None
        self._clusters: dict[str, tuple[float, ClusterInfo]] = {}

    async def __aenter__(self) -> Self:
        config = aws_config(read_timeout=60)
        try:
            self._ec2 = await self._stack.enter_async_context(
                self._session.create_client(
                    "ec2",
                    region_name=self._region,
                    endpoint_url=self._endpoint_url,
                    config=config,
                )
            )
            self._ssm = await self._stack.enter_async_context(
                self._session.create_client(
                    "ssm",
                    region_name=self._region,
                    endpoint_url=self._endpoint_url,
                    config=config,
                )
            )
            self._eks = await self._stack.enter_async_context(
                self._session.create_client(
                    "eks",
                    region_name=self._region,
                    endpoint_url=self._endpoint_url,
                    config=config,
                )
            )
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._ec2 = self._ssm = self._eks = None
        await self._stack.aclose()

    @property
    def region(self) -> str:
        """The region the clients talk to (resolved by the chain if not given)."""
        if self._ec2 is None:
            return self._region or ""
        return self._client.meta.region_name

    @property
    def _client(self) -> EC2Client:
        if self._ec2 is None:
            raise RuntimeError("AwsCloud is not open; use `async with AwsCloud(...)`")
        return self._ec2

    # -- the port ------------------------------------------------------------------------

    async def create(self, request: CreateRequest) -> Instance:
        check_request(request)
        existing = await self._by_token(request.idempotency_token)
        if existing is not None:
            return _same_intent(existing, request)
        params = await self._run_params(request)
        try:
            reply = await self._client.run_instances(**params)
        except Exception as err:
            if error_code_of(err) == TOKEN_TERMINATED_CODE:
                # The token's VM is gone for good; return it as terminated (port contract).
                return await self._terminated_for(request)
            raise translate(
                err,
                operation="RunInstances",
                instance_type=request.instance_type,
                capacity_type=request.capacity_type,
                subnet=params.get("SubnetId"),
            ) from err
        raw = reply["Instances"][0]
        vm = _to_instance(raw)
        now = self._clock()
        # forget ids past the window, so the map stays as small as the launches in it
        for old in [i for i, t in self._launched.items() if now - t >= self._consistency]:
            del self._launched[old]
        self._launched[vm.id] = now
        return vm

    async def find(self, idempotency_token: str) -> Instance | None:
        raw = await self._by_token(idempotency_token)
        return _to_instance(raw) if raw is not None else None

    async def delete(self, instance_id: str) -> None:
        try:
            await self._client.terminate_instances(InstanceIds=[instance_id])
        except Exception as err:
            cloud_err = translate(err, operation="TerminateInstances", instance_id=instance_id)
            if isinstance(cloud_err, InstanceNotFound):
                if self._fresh(instance_id):
                    raise self._not_visible_yet(instance_id, "TerminateInstances") from err
                return  # idempotent: no such VM is as good as a terminated one
            raise cloud_err from err

    async def describe(self, instance_id: str) -> Instance:
        try:
            reply = await self._client.describe_instances(InstanceIds=[instance_id])
        except Exception as err:
            cloud_err = translate(err, operation="DescribeInstances", instance_id=instance_id)
            if isinstance(cloud_err, InstanceNotFound) and self._fresh(instance_id):
                raise self._not_visible_yet(instance_id, "DescribeInstances") from err
            raise cloud_err from err
        for reservation in reply.get("Reservations", []):
            for raw in reservation.get("Instances", []):
                if raw.get("InstanceId") == instance_id:
                    return _to_instance(raw)
        if self._fresh(instance_id):
            raise self._not_visible_yet(instance_id, "DescribeInstances")
        raise InstanceNotFound(f"instance {instance_id!r} not found", instance_id=instance_id)

    async def list(self, tags: dict[str, str]) -> builtins.list[Instance]:
        filters: list[FilterTypeDef] = [
            {"Name": "instance-state-name", "Values": list(_LIVE_STATES)}
        ]
        for key, value in sorted(tags.items()):
            filters.append({"Name": f"tag:{key}", "Values": [value]})
        found = [_to_instance(raw) for raw in await self._describe_all(filters)]
        live = [vm for vm in found if vm.state != "terminated"]
        return sorted(live, key=lambda vm: (vm.created_at, vm.id))

    async def start(self, instance_id: str) -> None:
        raw_state = await self._raw_state(instance_id)
        if raw_state in ("pending", "running"):
            return
        if raw_state == "stopping":
            # EC2 refuses to start a stopping VM; it will be stopped shortly.
            raise TransientCloudError(f"instance {instance_id} is still stopping")
        await self._call(
            "StartInstances", instance_id, self._client.start_instances(InstanceIds=[instance_id])
        )

    async def stop(self, instance_id: str) -> None:
        raw_state = await self._raw_state(instance_id)
        if raw_state in ("stopping", "stopped"):
            return
        await self._call(
            "StopInstances", instance_id, self._client.stop_instances(InstanceIds=[instance_id])
        )

    async def instance_types(self) -> builtins.list[InstanceType]:
        now = self._clock()
        if self._catalogue is not None and now - self._catalogue[0] < CATALOGUE_TTL_SECONDS:
            return builtins.list(self._catalogue[1])
        found: list[InstanceType] = []
        paginator = self._client.get_paginator("describe_instance_types")
        try:
            if self._offered is None:
                async for page in paginator.paginate():
                    found += [_to_type(t) for t in page.get("InstanceTypes", [])]
            else:
                for i in range(0, len(self._offered), _TYPES_PER_CALL):
                    chunk = builtins.list(self._offered[i : i + _TYPES_PER_CALL])
                    async for page in paginator.paginate(InstanceTypes=chunk):  # type: ignore[arg-type]
                        found += [_to_type(t) for t in page.get("InstanceTypes", [])]
        except Exception as err:
            raise translate(err, operation="DescribeInstanceTypes") from err
        found.sort(key=lambda t: t.name)
        self._catalogue = (now, found)
        return builtins.list(found)

    async def subnets(self, terms: Sequence[SelectorTerm]) -> builtins.list[Subnet]:
        """DescribeSubnets once per term (a term's tags ANDed as ``tag:`` filters, ``"*"``
        as ``tag-key``), unioned by id; no terms: the region's default subnets (one per
        zone, ``default-for-az``)."""
        queries = [_subnet_filters(t) for t in terms] or [
            [{"Name": "default-for-az", "Values": ["true"]}]
        ]
        found: dict[str, Subnet] = {}
        paginator = self._client.get_paginator("describe_subnets")
        try:
            for filters in queries:
                async for page in paginator.paginate(Filters=filters):
                    for raw in page.get("Subnets", []):
                        subnet = Subnet(
                            id=str(raw.get("SubnetId", "")),
                            zone=str(raw.get("AvailabilityZone", "")),
                            free_addresses=int(raw.get("AvailableIpAddressCount") or 0),
                        )
                        found[subnet.id] = subnet
        except Exception as err:
            raise translate(err, operation="DescribeSubnets") from err
        return sorted(found.values(), key=lambda s: s.id)

    async def security_groups(self, terms: Sequence[SelectorTerm]) -> builtins.list[str]:
        """DescribeSecurityGroups once per term, unioned: the group ids."""
        found: set[str] = set()
        paginator = self._client.get_paginator("describe_security_groups")
        try:
            for term in terms:
                filters = _subnet_filters(term, id_filter="group-id")
                if term.name:
                    filters = [{"Name": "group-name", "Values": [term.name]}]
                async for page in paginator.paginate(Filters=filters):
                    found |= {str(g.get("GroupId", "")) for g in page.get("SecurityGroups", [])}
        except Exception as err:
            raise translate(err, operation="DescribeSecurityGroups") from err
        return sorted(found)

    async def describe_cluster(self, name: str) -> ClusterInfo:
        now = self._clock()
        cached = self._clusters.get(name)
        if cached is not None and now - cached[0] < CLUSTER_TTL_SECONDS:
            return cached[1]
        if self._eks is None:
            raise RuntimeError("AwsCloud is not open; use `async with AwsCloud(...)`")
        try:
            reply = await self._eks.describe_cluster(name=name)
        except ClientError as err:
            if error_code(err) == "ResourceNotFoundException":
                raise InvalidRequest(
                    f"eks:DescribeCluster: no EKS cluster {name!r}", reason="InvalidCluster"
                ) from err
            raise translate(err, operation=f"eks:DescribeCluster {name}") from err
        except Exception as err:
            raise translate(err, operation=f"eks:DescribeCluster {name}") from err
        cluster = reply.get("cluster", {})
        network = cluster.get("kubernetesNetworkConfig", {})
        info = ClusterInfo(
            name=name,
            endpoint=str(cluster.get("endpoint") or ""),
            certificate_authority=str(cluster.get("certificateAuthority", {}).get("data") or ""),
            service_cidr=str(
                network.get("serviceIpv4Cidr") or network.get("serviceIpv6Cidr") or ""
            ),
        )
        missing = [
            k
            for k, v in (
                ("endpoint", info.endpoint),
                ("certificate authority", info.certificate_authority),
                ("service CIDR", info.service_cidr),
            )
            if not v
        ]
        if missing:
            # a cluster still being created has no endpoint yet: retry later
            raise TransientCloudError(
                f"eks:DescribeCluster {name}: no {', '.join(missing)} yet (status "
                f"{cluster.get('status', 'unknown')})"
            )
        self._clusters[name] = (now, info)
        return info

    # -- inspection (tests, the demo's figures); not part of the port ---------------------

    async def snapshot(self, tags: dict[str, str] | None = None) -> CloudSnapshot:
        """Every VM DescribeInstances shows (terminated ones too, while EC2 keeps them) with
        all of ``tags``, and the duplicates among the live ones by ``Name`` tag: the
        cloud's own record, for oracles that must not trust the operator's."""
        filters: list[FilterTypeDef] = []
        for key, value in sorted((tags or {}).items()):
            filters.append({"Name": f"tag:{key}", "Values": [value]})
        found = sorted(
            (_to_instance(raw) for raw in await self._describe_all(filters)),
            key=lambda vm: (vm.created_at, vm.id),
        )
        live = [vm for vm in found if vm.state != "terminated"]
        return CloudSnapshot(
            instances=tuple(found),
            calls={},
            duplicates=len(live) - len({vm.name for vm in live}),
        )

    # -- helpers ----------------------------------------------------------------------------

    async def _describe_all(
        self, filters: Sequence[FilterTypeDef]
    ) -> builtins.list[InstanceTypeDef]:
        """Every instance matching ``filters``, all pages, oldest first."""
        paginator = self._client.get_paginator("describe_instances")
        out: list[InstanceTypeDef] = []
        try:
            async for page in paginator.paginate(
                Filters=builtins.list(filters), PaginationConfig={"PageSize": self._page_size}
            ):
                for reservation in page.get("Reservations", []):
                    out += reservation.get("Instances", [])
        except Exception as err:
            raise translate(err, operation="DescribeInstances") from err
        return out

    async def _by_token(self, token: str) -> InstanceTypeDef | None:
        """The VM launched with ``token``, in any state, if DescribeInstances shows it."""
        found = await self._describe_all([{"Name": f"tag:{TOKEN_TAG}", "Values": [token]}])
        # A live VM beats a terminated one (there is at most one of each per token).
        found.sort(key=lambda raw: _to_instance(raw).state == "terminated")
        return found[0] if found else None

    async def _terminated_for(self, request: CreateRequest) -> Instance:
        """EC2 said the token's VM was terminated; describe it, or vouch for it unseen."""
        raw = await self._by_token(request.idempotency_token)
        if raw is not None:
            return _to_instance(raw)
        # Terminated VMs drop out of DescribeInstances after about an hour. The port's
        # callers only need "terminated" and an id that is not any live VM's.
        return Instance(
            id=f"terminated:{request.idempotency_token}",
            name=request.name,
            instance_type=request.instance_type,
            image=request.image,
            state="terminated",
            private_ip="",
            public_ip=None,
            tags=dict(request.tags),
            created_at=0.0,
            launched_at=None,
        )

    async def _run_params(self, request: CreateRequest) -> RunInstancesRequestTypeDef:
        launch = request.launch
        tags = [
            {"Key": k, "Value": v}
            for k, v in {
                **request.tags,
                NAME_TAG: request.name,
                TOKEN_TAG: request.idempotency_token,
                IMAGE_TAG: request.image,
                LAUNCH_TAG: _launch_hash(request),
                **({MARKET_TAG: "spot"} if request.capacity_type == "spot" else {}),
            }.items()
        ]
        specs: list[TagSpecificationTypeDef] = [
            {"ResourceType": "instance", "Tags": tags},  # type: ignore[typeddict-item]
            {"ResourceType": "volume", "Tags": tags},  # type: ignore[typeddict-item]
        ]
        params: RunInstancesRequestTypeDef = {
            "ImageId": await self.resolve_image(request.image),
            "InstanceType": request.instance_type,  # type: ignore[typeddict-item]
            "MinCount": 1,
            "MaxCount": 1,
            "ClientToken": request.idempotency_token,
            "TagSpecifications": specs,
            # IMDSv2 only: pods on the node cannot read the role's credentials with a GET.
            "MetadataOptions": {"HttpTokens": "required", "HttpPutResponseHopLimit": 1},
        }
        if request.capacity_type == "spot":
            # one-time, terminated when EC2 takes it back: the pool replaces it, nothing
            # waits to be restarted (Karpenter's launch of a spot offering)
            params["InstanceMarketOptions"] = {
                "MarketType": "spot",
                "SpotOptions": {
                    "SpotInstanceType": "one-time",
                    "InstanceInterruptionBehavior": "terminate",
                },
            }
        if launch.subnets:
            # one subnet: the caller's choice (a pool's, recorded with its intent); several
            # (an Instance's): one by the token, the same on every repeat
            params["SubnetId"] = _pick(launch.subnets, request.idempotency_token)
        elif request.zone:
            params["Placement"] = {"AvailabilityZone": request.zone}
        if launch.security_groups:
            params["SecurityGroupIds"] = builtins.list(launch.security_groups)
        if launch.instance_profile:
            key = "Arn" if launch.instance_profile.startswith("arn:") else "Name"
            params["IamInstanceProfile"] = {key: launch.instance_profile}  # type: ignore[misc]
        if launch.root_volume is not None:
            root = launch.root_volume
            params["BlockDeviceMappings"] = [
                {
                    "DeviceName": root.device_name,
                    "Ebs": {
                        # EC2 sizes volumes in whole GiB; the node class's sizes are GiB
                        "VolumeSize": -(-root.size_bytes // GiB),
                        "VolumeType": root.volume_type,  # type: ignore[typeddict-item]
                        "Encrypted": root.encrypted,
                        "DeleteOnTermination": True,
                    },
                }
            ]
        if request.user_data:
            params["UserData"] = request.user_data  # botocore base64-encodes it
        return params

    async def resolve_image(self, image: str) -> str:
        """An AMI id as it is; ``resolve:ssm:<parameter>``: the parameter's value (one
        GetParameter), as RunInstances would resolve it now."""
        if not image.startswith(SSM_IMAGE_PREFIX):
            return image
        name = image.removeprefix(SSM_IMAGE_PREFIX)
        if self._ssm is None:
            raise RuntimeError("AwsCloud is not open; use `async with AwsCloud(...)`")
        try:
            reply = await self._ssm.get_parameter(Name=name)
        except Exception as err:
            raise translate(err, operation=f"ssm:GetParameter {name}") from err
        value = str(reply.get("Parameter", {}).get("Value") or "")
        if not value.startswith("ami-"):
            raise InvalidRequest(
                f"SSM parameter {name} holds {value[:64]!r}, not an AMI id", reason="InvalidAMI"
            )
        return value

    async def _raw_state(self, instance_id: str) -> str:
        """EC2's own state name (start and stop need stopping apart from stopped)."""
        try:
            reply = await self._client.describe_instances(InstanceIds=[instance_id])
        except Exception as err:
            cloud_err = translate(err, operation="DescribeInstances", instance_id=instance_id)
            if isinstance(cloud_err, InstanceNotFound) and self._fresh(instance_id):
                raise self._not_visible_yet(instance_id, "DescribeInstances") from err
            raise cloud_err from err
        states = [
            str(raw.get("State", {}).get("Name"))
            for r in reply.get("Reservations", [])
            for raw in r.get("Instances", [])
        ]
        if not states:
            raise InstanceNotFound(f"instance {instance_id!r} not found", instance_id=instance_id)
        if states[0] in ("shutting-down", "terminated"):
            raise InvalidRequest(f"instance {instance_id} is terminated")
        return states[0]

    async def _call(self, operation: str, instance_id: str, call: Any) -> None:
        try:
            await call
        except Exception as err:
            raise translate(err, operation=operation, instance_id=instance_id) from err

    def _fresh(self, instance_id: str) -> bool:
        launched = self._launched.get(instance_id)
        if launched is None:
            return False
        if self._clock() - launched >= self._consistency:
            del self._launched[instance_id]
            return False
        return True

    def _not_visible_yet(self, instance_id: str, operation: str) -> TransientCloudError:
        return TransientCloudError(
            f"{operation}: instance {instance_id} was launched moments ago and is not "
            "visible yet (EC2 is eventually consistent); retrying"
        )


def error_code_of(err: Exception) -> str:
    return error_code(err) if isinstance(err, ClientError) else ""


def _same_intent(raw: InstanceTypeDef, request: CreateRequest) -> Instance:
    """``raw`` was launched with this token: the VM, if it was for the same request (what
    EC2 checks of a ClientToken, done here for servers that do not)."""
    vm = _to_instance(raw)
    sent = (request.name, request.instance_type, request.image, dict(request.tags))
    launch = _tags(raw).get(LAUNCH_TAG, "")
    if sent != (vm.name, vm.instance_type, vm.image, vm.tags) or launch != _launch_hash(request):
        raise IdempotencyMismatch(
            f"idempotency token {request.idempotency_token!r} was used with other arguments "
            f"for instance {vm.id}"
        )
    return vm


def _launch_hash(request: CreateRequest) -> str:
    launch = request.launch
    text = "\n".join(
        [
            ",".join(launch.subnets),
            ",".join(launch.security_groups),
            launch.instance_profile or "",
            repr(launch.root_volume) if launch.root_volume is not None else "",
            hashlib.sha256(request.user_data.encode()).hexdigest(),
            # a zone without a subnet (Placement) is part of the launch too
            *([request.zone] if request.zone and not launch.subnets else []),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _pick(choices: Sequence[str], token: str) -> str:
    """One of ``choices`` by the token, the same one on every repeat (the only one when
    the caller chose)."""
    index = int(hashlib.sha256(token.encode()).hexdigest(), 16) % len(choices)
    return choices[index]


def _subnet_filters(term: SelectorTerm, id_filter: str = "subnet-id") -> list[FilterTypeDef]:
    """One selector term as EC2 filters: its id, or each tag (``"*"``: the key alone)."""
    if term.id:
        return [{"Name": id_filter, "Values": [term.id]}]
    return [
        {"Name": "tag-key", "Values": [key]}
        if value == "*"
        else {"Name": f"tag:{key}", "Values": [value]}
        for key, value in term.tags
    ]


def _tags(raw: InstanceTypeDef) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in raw.get("Tags", []) if "Key" in t and "Value" in t}


def _to_instance(raw: InstanceTypeDef) -> Instance:
    tags = _tags(raw)
    state = _BY_EC2_STATE.get(str(raw.get("State", {}).get("Name")), "pending")
    launch_time = raw.get("LaunchTime")
    # LaunchTime moves on every start; the primary interface's attach time does not.
    attach_times = [
        eni["Attachment"]["AttachTime"]
        for eni in raw.get("NetworkInterfaces", [])
        if eni.get("Attachment", {}).get("DeviceIndex") == 0
        and "AttachTime" in eni.get("Attachment", {})
    ]
    created = attach_times[0] if attach_times else launch_time
    public_ip = raw.get("PublicIpAddress") or None
    return Instance(
        id=raw["InstanceId"],
        name=tags.get(NAME_TAG, ""),
        instance_type=str(raw.get("InstanceType", "")),
        image=tags.get(IMAGE_TAG) or str(raw.get("ImageId", "")),
        state=state,
        private_ip=str(raw.get("PrivateIpAddress") or ""),
        # like the port says: a stopped VM has given its public address up
        public_ip=public_ip if state in ("pending", "running") else None,
        tags={k: v for k, v in tags.items() if k not in BOOKKEEPING_TAGS},
        created_at=_epoch(created),
        launched_at=_epoch(launch_time) if state == "running" else None,
        image_id=str(raw.get("ImageId", "")),
        capacity_type="spot"
        if raw.get("InstanceLifecycle") == "spot" or tags.get(MARKET_TAG) == "spot"
        else "on-demand",
        zone=str(raw.get("Placement", {}).get("AvailabilityZone") or ""),
    )


def _epoch(value: datetime | None) -> float:
    return value.timestamp() if value is not None else 0.0


def _to_type(raw: InstanceTypeInfoTypeDef) -> InstanceType:
    network = raw.get("NetworkInfo", {})
    archs = [str(a) for a in raw.get("ProcessorInfo", {}).get("SupportedArchitectures", [])]
    storage = raw.get("InstanceStorageInfo", {})
    local_disk = int(storage.get("TotalSizeInGB") or 0) * GiB
    enis = int(network.get("MaximumNetworkInterfaces") or 1)
    ips_per_eni = int(network.get("Ipv4AddressesPerInterface") or 1)
    return InstanceType(
        name=str(raw.get("InstanceType", "")),
        cpu_cores=int(raw.get("VCpuInfo", {}).get("DefaultVCpus") or 0),
        memory_bytes=int(raw.get("MemoryInfo", {}).get("SizeInMiB") or 0) * _MIB,
        disk_bytes=local_disk or _ROOT_DISK,
        pods=max_pods(enis, ips_per_eni),
        enis=enis,
        ips_per_eni=ips_per_eni,
        # the first architecture is the one the type runs (x86_64 types also list i386)
        architecture=_ARCHITECTURES.get(archs[0], archs[0]) if archs else "amd64",
        gpus=_nvidia_gpus(raw),
    )


def _nvidia_gpus(raw: InstanceTypeInfoTypeDef) -> int:
    """The type's NVIDIA GPUs: only those become ``nvidia.com/gpu`` (another maker's device
    plugin advertises another resource)."""
    gpus = raw.get("GpuInfo", {}).get("Gpus", [])
    return sum(int(g.get("Count") or 0) for g in gpus if g.get("Manufacturer") == "NVIDIA")


async def aws_environment_problems(
    region: str | None = None, profile: str | None = None
) -> builtins.list[str]:
    """What keeps botocore's standard chain from finding a region and credentials, in words
    naming the settings that would fix it; empty when both are found.

    Looks where the SDK looks (environment, shared config and credentials files, the
    profile, IRSA's web identity token, container and instance metadata), without calling
    AWS.
    """
    try:
        session = aws_session(profile)
        found_region = region or _chain_region(session)
    except ProfileNotFound as err:
        return [f"AWS profile {err.kwargs.get('profile', profile)!r} not found in ~/.aws/config"]
    problems = []
    if not found_region:
        problems.append(
            "no AWS region: pass --aws-region, or set AWS_REGION (or AWS_DEFAULT_REGION), "
            "or region in the profile"
        )
    try:
        credentials = await session.get_credentials()
    except BotoCoreError as err:
        problems.append(f"AWS credentials could not be loaded: {err}")
    else:
        if credentials is None:
            problems.append(
                "no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                "AWS_PROFILE, or (IRSA) AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE, or run "
                "where instance or container metadata provides a role"
            )
    return problems


def aws_session(profile: str | None) -> AioSession:
    """An aiobotocore session (the SDK's standard chain, ``profile`` if named). Imported here,
    when an AWS client is made: the SDK takes longer to import than the rest of the operator,
    and a run on the simulated cloud (or ``--help``) never needs it."""
    from aiobotocore.session import AioSession

    return AioSession(profile=profile)


def aws_config(*, read_timeout: float) -> AioConfig:
    """The clients' settings: one attempt (the caller's backoff is the one retry policy),
    10 s to connect, ``read_timeout`` to read."""
    from aiobotocore.config import AioConfig

    return AioConfig(
        retries={"total_max_attempts": 1, "mode": "standard"},
        connect_timeout=10,
        read_timeout=read_timeout,
    )


def _chain_region(session: AioSession) -> str | None:
    """The chain's region: botocore's (``AWS_DEFAULT_REGION``, the profile's ``region``),
    else ``AWS_REGION``, which the other AWS SDKs read and EKS injects, but botocore does not.
    """
    found = session.get_config_variable("region")
    return str(found) if found else (os.environ.get("AWS_REGION") or None)

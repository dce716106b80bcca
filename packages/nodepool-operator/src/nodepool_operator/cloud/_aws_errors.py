"""EC2's error codes as the port's typed errors: the one place that reads an AWS error code.

Codes are EC2's (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)
plus the ones moto's server answers with where it differs. Anything unknown is a plain
:class:`CloudError`: not retried blindly, reported with its code, so a new code shows up in a
condition instead of a retry storm.
"""

from __future__ import annotations

import re
from typing import Final

from aiohttp import ClientError as HttpClientError
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    EndpointConnectionError,
    HTTPClientError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ReadTimeoutError,
)

from ._port import (
    CapacityUnavailable,
    CloudError,
    IdempotencyMismatch,
    InstanceNotFound,
    InvalidRequest,
    MarketType,
    PermissionDenied,
    QuotaExceeded,
    SubnetFull,
    TransientCloudError,
)

#: No capacity for this type (in this zone) right now: retry later or with another type.
CAPACITY_CODES: Final = frozenset(
    {
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientCapacity",
        # the type is not offered in the chosen subnet's zone: another zone or type may do
        "Unsupported",
    }
)
#: Refusals of a spot launch that leave on-demand open (the account's spot limit, a spot
#: price above the cap): for a spot request, the spot offering is out, not the type.
SPOT_CAPACITY_CODES: Final = frozenset({"MaxSpotInstanceCountExceeded", "SpotMaxPriceTooLow"})
#: The subnet has no address left: another subnet (in the same zone or another) would do.
SUBNET_FULL_CODE: Final = "InsufficientFreeAddressesInSubnet"
#: Quota codes that are the instance type's own limit: another type may launch at once.
TYPE_QUOTA_CODES: Final = frozenset({"InstanceLimitExceeded"})
#: The account's limits: nothing changes until a VM goes or the quota is raised.
QUOTA_CODES: Final = frozenset(
    {
        "InstanceLimitExceeded",
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "ResourceLimitExceeded",
    }
)
#: Throttling and the service's own failures: the caller's backoff retries them.
TRANSIENT_CODES: Final = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "InternalError",
        "InternalFailure",
        "ServiceUnavailable",
        "Unavailable",
        "RequestTimeout",
        "RequestExpired",
    }
)
#: The credentials may not do this: a policy must change, not the spec.
PERMISSION_CODES: Final = frozenset(
    {
        "UnauthorizedOperation",
        "AccessDenied",
        "AccessDeniedException",
        "AuthFailure",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "OptInRequired",
        "Blocked",
    }
)
#: The request can never succeed as sent (a bad type, AMI, subnet, group, profile...).
INVALID_CODES: Final = frozenset(
    {
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "InvalidParameter",
        "MissingParameter",
        "UnknownParameter",
        "ValidationError",
        "InvalidInstanceType",
        "InvalidInstanceType.NotFound",  # moto's answer to an unknown type
        "InvalidAMIID.NotFound",
        "InvalidAMIID.Malformed",
        "InvalidAMIID.Unavailable",
        "InvalidSubnetID.NotFound",
        "InvalidSubnetID.Malformed",
        "InvalidGroup.NotFound",
        "InvalidGroupId.Malformed",
        "InvalidSecurityGroupID.NotFound",
        "InvalidUserData.Malformed",
        "InvalidBlockDeviceMapping",
        "InvalidKeyPair.NotFound",
        "IncorrectInstanceState",  # e.g. start a terminated VM
        "IncorrectState",
        "ParameterNotFound",  # SSM: the AMI parameter does not exist
        "NoSuchEntity",  # moto: the instance profile does not exist
        "InvalidKeyId",
    }
)
#: No VM has this id (or, right after a launch, none is visible yet: see AwsCloud.describe).
NOT_FOUND_CODES: Final = frozenset({"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"})
#: The token was used with other arguments.
MISMATCH_CODE: Final = "IdempotentParameterMismatch"
#: The token's VM was terminated: the token names that VM for good.
TOKEN_TERMINATED_CODE: Final = "IdempotentInstanceTerminated"


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code") or "")


def translate(
    err: Exception,
    *,
    operation: str,
    instance_id: str | None = None,
    instance_type: str | None = None,
    capacity_type: MarketType = "on-demand",
    subnet: str | None = None,
) -> CloudError:
    """The port's error for an exception botocore raised during ``operation``.

    ``instance_id`` is the VM the call was about, for :class:`InstanceNotFound`;
    ``instance_type`` the type a launch asked for, carried by a capacity or the type's own
    quota error so the caller marks that offering out without reading a message;
    ``capacity_type`` the market it asked in (a spot refusal names it, so on-demand is tried).
    ``subnet`` the subnet it was sent to, carried by :class:`SubnetFull`.
    """
    if isinstance(err, ClientError):
        return _from_client_error(
            err,
            operation=operation,
            instance_id=instance_id,
            instance_type=instance_type,
            capacity_type=capacity_type,
            subnet=subnet,
        )
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return PermissionDenied(f"{operation}: no usable AWS credentials: {err}")
    if isinstance(err, NoRegionError):
        return InvalidRequest(f"{operation}: no AWS region configured: {err}", reason="NoRegion")
    if isinstance(
        err, EndpointConnectionError | ConnectionError | HTTPClientError | ReadTimeoutError
    ):
        return TransientCloudError(f"{operation}: cannot reach EC2: {err}")
    if isinstance(err, BotoCoreError):
        return CloudError(f"{operation}: {err}")
    if isinstance(err, TimeoutError | OSError | HttpClientError):
        return TransientCloudError(f"{operation}: {type(err).__name__}: {err}")
    return CloudError(f"{operation}: {type(err).__name__}: {err}")


def _from_client_error(
    err: ClientError,
    *,
    operation: str,
    instance_id: str | None,
    instance_type: str | None,
    capacity_type: MarketType = "on-demand",
    subnet: str | None = None,
) -> CloudError:
    code = error_code(err)
    detail = str(err.response.get("Error", {}).get("Message") or err)
    message = f"{operation}: {code}: {detail}"
    status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code == SUBNET_FULL_CODE:
        return SubnetFull(message, subnet=subnet, zone=zone_named(detail))
    spot = capacity_type == "spot"
    if code in CAPACITY_CODES or (spot and code in SPOT_CAPACITY_CODES):
        return CapacityUnavailable(
            message,
            instance_type=instance_type,
            zone=zone_named(detail),
            capacity_type=capacity_type,
        )
    if code in TYPE_QUOTA_CODES:
        return QuotaExceeded(message, instance_type=instance_type, zone=zone_named(detail))
    if code in QUOTA_CODES:
        return QuotaExceeded(message)
    if code in TRANSIENT_CODES or status >= 500 or status == 429:
        return TransientCloudError(message)
    if code == MISMATCH_CODE:
        return IdempotencyMismatch(message)
    if code in NOT_FOUND_CODES:
        return InstanceNotFound(message, instance_id=instance_id)
    if code in PERMISSION_CODES or status == 403:
        return PermissionDenied(message)
    if code in INVALID_CODES or code.startswith("Invalid"):
        reason = invalid_reason(code, detail)
        # IAM is eventually consistent: a profile made a moment ago is refused by EC2 until
        # it propagates, so that refusal is asked again after a while, not held for good.
        wait = INSTANCE_PROFILE_RETRY if reason == "InvalidInstanceProfile" else None
        return InvalidRequest(message, reason=reason, retry_after=wait)
    return CloudError(message)


#: An availability zone's name as EC2 writes it in a message ("... in the Availability Zone
#: you requested (us-east-1a)"); EC2 gives the zone in no structured field of the error.
_ZONE: Final = re.compile(r"\b([a-z]{2}(?:-gov)?-[a-z]+-\d[a-z])\b")


def zone_named(message: str) -> str | None:
    """The availability zone an error message names, if exactly one."""
    zones = set(_ZONE.findall(message))
    return zones.pop() if len(zones) == 1 else None


#: How long a refused instance profile holds creates back before they are asked again.
INSTANCE_PROFILE_RETRY: Final = 60.0

#: An invalid request's reason by EC2's code prefix (the part before the first dot).
_REASON_BY_CODE: Final = {
    "InvalidAMIID": "InvalidAMI",
    "ParameterNotFound": "InvalidAMI",  # SSM: the AMI's parameter does not exist
    "InvalidSubnetID": "InvalidSubnet",
    "InvalidSubnet": "InvalidSubnet",
    "InvalidGroup": "InvalidSecurityGroup",
    "InvalidGroupId": "InvalidSecurityGroup",
    "InvalidSecurityGroupID": "InvalidSecurityGroup",
    "NoSuchEntity": "InvalidInstanceProfile",  # moto: the profile does not exist
    "InvalidInstanceType": "InvalidInstanceType",
    "InvalidUserData": "InvalidUserData",
    "InvalidKeyPair": "InvalidKeyPair",
    "InvalidBlockDeviceMapping": "InvalidBlockDeviceMapping",
    "InvalidKeyId": "InvalidKmsKey",
}

#: Words in the message of a generic code (InvalidParameterValue...) naming what is wrong.
_REASON_BY_WORD: Final = (
    ("iaminstanceprofile", "InvalidInstanceProfile"),
    ("instance profile", "InvalidInstanceProfile"),
    ("subnet", "InvalidSubnet"),
    ("security group", "InvalidSecurityGroup"),
    ("instance type", "InvalidInstanceType"),
    ("instancetype", "InvalidInstanceType"),
    ("image id", "InvalidAMI"),
    ("imageid", "InvalidAMI"),
)


def invalid_reason(code: str, message: str) -> str:
    """The condition reason for an invalid request: what is wrong, not EC2's code
    (``InvalidParameterValue`` says little; its message names the parameter)."""
    reason = _REASON_BY_CODE.get(code.split(".", 1)[0])
    if reason is not None:
        return reason
    text = message.lower()
    for word, named in _REASON_BY_WORD:
        if word in text:
            return named
    return "InvalidParameter"

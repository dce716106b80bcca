"""EC2's error codes as the port's typed errors: the one place that reads an AWS error code.

Codes are EC2's (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html)
plus the ones moto's server answers with where it differs. Anything unknown is a plain
:class:`CloudError`: not retried blindly, reported with its code, so a new code shows up in a
condition instead of a retry storm.
"""

from __future__ import annotations

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
    PermissionDenied,
    QuotaExceeded,
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


def translate(err: Exception, *, operation: str, instance_id: str | None = None) -> CloudError:
    """The port's error for an exception botocore raised during ``operation``.

    ``instance_id`` is the VM the call was about, for :class:`InstanceNotFound`.
    """
    if isinstance(err, ClientError):
        return _from_client_error(err, operation=operation, instance_id=instance_id)
    if isinstance(err, NoCredentialsError | PartialCredentialsError):
        return PermissionDenied(f"{operation}: no usable AWS credentials: {err}")
    if isinstance(err, NoRegionError):
        return InvalidRequest(f"{operation}: no AWS region configured: {err}")
    if isinstance(
        err, EndpointConnectionError | ConnectionError | HTTPClientError | ReadTimeoutError
    ):
        return TransientCloudError(f"{operation}: cannot reach EC2: {err}")
    if isinstance(err, BotoCoreError):
        return CloudError(f"{operation}: {err}")
    if isinstance(err, TimeoutError | OSError | HttpClientError):
        return TransientCloudError(f"{operation}: {type(err).__name__}: {err}")
    return CloudError(f"{operation}: {type(err).__name__}: {err}")


def _from_client_error(err: ClientError, *, operation: str, instance_id: str | None) -> CloudError:
    code = error_code(err)
    detail = str(err.response.get("Error", {}).get("Message") or err)
    message = f"{operation}: {code}: {detail}"
    status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
    if code in CAPACITY_CODES:
        return CapacityUnavailable(message)
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
        return InvalidRequest(message)
    return CloudError(message)

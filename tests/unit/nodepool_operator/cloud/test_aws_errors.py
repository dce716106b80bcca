"""EC2's error codes map onto the port's typed errors (the table callers' retry policies rely on).

These are the codes moto's server never answers with (capacity, quotas, throttling...), so
the mapping is checked here on the errors botocore builds from EC2's replies; everything
moto can produce is checked over the wire in tests/contract/.
"""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError, NoCredentialsError

from nodepool_operator.cloud import (
    CapacityUnavailable,
    CloudError,
    IdempotencyMismatch,
    InstanceNotFound,
    InvalidRequest,
    PermissionDenied,
    QuotaExceeded,
    SubnetFull,
    TransientCloudError,
    max_pods,
)
from nodepool_operator.cloud._aws_errors import translate


def ec2_error(code: str, status: int = 400, message: str = "") -> ClientError:
    return ClientError(
        {
            "Error": {"Code": code, "Message": message or f"message of {code}"},
            "ResponseMetadata": {"HTTPStatusCode": status},  # type: ignore[typeddict-item]
        },
        "RunInstances",
    )


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("InsufficientInstanceCapacity", CapacityUnavailable),
        ("InsufficientHostCapacity", CapacityUnavailable),
        ("Unsupported", CapacityUnavailable),
        ("InsufficientFreeAddressesInSubnet", SubnetFull),
        ("InstanceLimitExceeded", QuotaExceeded),
        ("VcpuLimitExceeded", QuotaExceeded),
        ("MaxSpotInstanceCountExceeded", QuotaExceeded),
        ("RequestLimitExceeded", TransientCloudError),
        ("Throttling", TransientCloudError),
        ("ThrottlingException", TransientCloudError),
        ("InternalError", TransientCloudError),
        ("Unavailable", TransientCloudError),
        ("IdempotentParameterMismatch", IdempotencyMismatch),
        ("InvalidParameterValue", InvalidRequest),
        ("InvalidParameterCombination", InvalidRequest),
        ("InvalidAMIID.NotFound", InvalidRequest),
        ("InvalidSubnetID.NotFound", InvalidRequest),
        ("InvalidGroup.NotFound", InvalidRequest),
        ("IncorrectInstanceState", InvalidRequest),
        ("InvalidSomethingNew", InvalidRequest),
        ("UnauthorizedOperation", PermissionDenied),
        ("AuthFailure", PermissionDenied),
        ("InvalidClientTokenId", PermissionDenied),
        ("InvalidInstanceID.NotFound", InstanceNotFound),
        ("InvalidInstanceID.Malformed", InstanceNotFound),
    ],
)
def test_ec2_codes_become_typed_errors(code: str, expected: type[CloudError]) -> None:
    err = translate(ec2_error(code), operation="RunInstances", instance_id="i-1")
    assert type(err) is expected
    assert code in str(err), "the message keeps EC2's code for the condition and the log"


@pytest.mark.parametrize(
    ("code", "message", "offering"),
    [
        (
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient m5.large capacity in the Availability Zone "
            "you requested (us-east-1a). Our system will be working on provisioning "
            "additional capacity. You can currently get m5.large capacity by not specifying "
            "an Availability Zone in your request or choosing us-east-1b, us-east-1c.",
            ("m5.large", None),  # several zones named: none is the one refused for sure
        ),
        (
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient m5.large capacity in the Availability Zone "
            "you requested (eu-west-1c).",
            ("m5.large", "eu-west-1c"),
        ),
        (
            "Unsupported",
            "The requested configuration is currently not supported.",
            ("m5.large", None),
        ),
        ("InstanceLimitExceeded", "You have requested more instances (21)", ("m5.large", None)),
        ("VcpuLimitExceeded", "You have requested more vCPU capacity", (None, None)),
    ],
)
def test_launch_refusals_name_the_offering(
    code: str, message: str, offering: tuple[str | None, str | None]
) -> None:
    """A refusal a launch of another type may not meet carries the type asked for (and the
    zone when EC2 names exactly one), so the controller marks the offering, not a message."""
    err = translate(
        ec2_error(code, message=message), operation="RunInstances", instance_type="m5.large"
    )
    assert isinstance(err, CapacityUnavailable | QuotaExceeded)
    assert (err.instance_type, err.zone) == offering


@pytest.mark.parametrize(
    ("code", "message", "reason"),
    [
        ("InvalidAMIID.NotFound", "The image id '[ami-0badbadbad]' does not exist", "InvalidAMI"),
        ("InvalidAMIID.Malformed", "Invalid id: ami-x", "InvalidAMI"),
        ("ParameterNotFound", "/aws/service/eks/...", "InvalidAMI"),
        ("InvalidSubnetID.NotFound", "The subnet ID 'subnet-1' does not exist", "InvalidSubnet"),
        (
            "InvalidGroup.NotFound",
            "The security group 'sg-1' does not exist",
            "InvalidSecurityGroup",
        ),
        ("InvalidSecurityGroupID.NotFound", "sg-1", "InvalidSecurityGroup"),
        ("NoSuchEntity", "Instance profile p cannot be found", "InvalidInstanceProfile"),
        (
            "InvalidParameterValue",
            "Value (p) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance "
            "Profile name",
            "InvalidInstanceProfile",
        ),
        ("InvalidParameterValue", "Invalid value 'z9' for InstanceType.", "InvalidInstanceType"),
        ("InvalidInstanceType.NotFound", "z9", "InvalidInstanceType"),
        ("InvalidUserData.Malformed", "not base64", "InvalidUserData"),
        ("InvalidKeyPair.NotFound", "key", "InvalidKeyPair"),
        ("InvalidParameterCombination", "cannot use both", "InvalidParameter"),
    ],
)
def test_an_invalid_request_names_what_is_wrong(code: str, message: str, reason: str) -> None:
    err = translate(ec2_error(code, message=message), operation="ec2:RunInstances")
    assert isinstance(err, InvalidRequest)
    assert err.reason == reason
    assert code in str(err)  # EC2's own code stays in the message
    # only IAM's propagation delay clears by itself; the rest hold until something changes
    assert (err.retry_after is not None) == (reason == "InvalidInstanceProfile")


def test_not_found_names_the_instance() -> None:
    err = translate(ec2_error("InvalidInstanceID.NotFound"), operation="X", instance_id="i-9")
    assert isinstance(err, InstanceNotFound)
    assert err.instance_id == "i-9"


def test_retry_policy_follows_the_type() -> None:
    capacity = translate(ec2_error("InsufficientInstanceCapacity"), operation="RunInstances")
    quota = translate(ec2_error("VcpuLimitExceeded"), operation="RunInstances")
    denied = translate(ec2_error("UnauthorizedOperation"), operation="RunInstances")
    assert capacity.retryable
    assert (quota.retryable, quota.retry_after) == (False, 300.0)
    assert (denied.retryable, denied.retry_after) == (False, 300.0)


@pytest.mark.parametrize("status", [500, 503, 429])
def test_unknown_codes_with_a_server_status_are_transient(status: int) -> None:
    err = translate(ec2_error("SomethingBroke", status), operation="DescribeInstances")
    assert type(err) is TransientCloudError


def test_an_unknown_client_code_is_a_plain_cloud_error_not_a_retry() -> None:
    err = translate(ec2_error("BrandNewCode"), operation="RunInstances")
    assert type(err) is CloudError
    assert not err.retryable


def test_connection_and_credential_failures() -> None:
    down = translate(EndpointConnectionError(endpoint_url="http://x"), operation="X")
    assert type(down) is TransientCloudError
    assert type(translate(NoCredentialsError(), operation="X")) is PermissionDenied


@pytest.mark.parametrize(
    ("enis", "ips", "pods"),
    [(3, 10, 29), (4, 15, 58), (8, 30, 234), (2, 2, 4)],
)
def test_eni_based_max_pods(enis: int, ips: int, pods: int) -> None:
    assert max_pods(enis, ips) == pods


@pytest.mark.parametrize(
    ("code", "market", "expected", "spot_out"),
    [
        # a spot launch without spot capacity: the spot offering is out, on-demand is open
        ("InsufficientInstanceCapacity", "spot", CapacityUnavailable, True),
        ("MaxSpotInstanceCountExceeded", "spot", CapacityUnavailable, True),
        ("SpotMaxPriceTooLow", "spot", CapacityUnavailable, True),
        # the same codes for an on-demand launch name no spot offering
        ("InsufficientInstanceCapacity", "on-demand", CapacityUnavailable, False),
        ("MaxSpotInstanceCountExceeded", "on-demand", QuotaExceeded, False),
    ],
)
def test_a_spot_refusal_names_the_spot_market(
    code: str, market: str, expected: type[CloudError], spot_out: bool
) -> None:
    err = translate(
        ec2_error(code),
        operation="RunInstances",
        instance_type="m5.large",
        capacity_type="spot" if market == "spot" else "on-demand",
    )
    assert type(err) is expected
    if isinstance(err, CapacityUnavailable):
        assert err.instance_type == "m5.large"
        assert (err.capacity_type == "spot") is spot_out


def test_a_full_subnet_names_the_subnet_not_the_type() -> None:
    """InsufficientFreeAddressesInSubnet marks the subnet it was sent to: the type may launch
    at once in another subnet."""
    err = translate(
        ec2_error("InsufficientFreeAddressesInSubnet", message="no free addresses"),
        operation="RunInstances",
        instance_type="m5.large",
        subnet="subnet-0123456789abcdef0",
    )
    assert isinstance(err, SubnetFull)
    assert (err.subnet, err.instance_type) == ("subnet-0123456789abcdef0", None)

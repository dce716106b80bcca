"""AwsCloud takes credentials and region from botocore's standard chain, not only from static
keys in the environment: IRSA's web identity (through moto's STS), a named profile from the
shared files, and any region. Each test clears the chain and sets only what it is about.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from nodepool_operator.cloud import AwsCloud, CreateRequest, aws_environment_problems
from nodepool_operator.testbed import MotoServer

_CHAIN = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_ROLE_ARN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_SESSION_NAME",
)


@pytest.fixture
def bare_chain(moto: MotoServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No credentials or region anywhere (metadata off: nothing to ask on this machine)."""
    for key in _CHAIN:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


def request(name: str) -> CreateRequest:
    return CreateRequest(
        name=name, instance_type="m5.large", image="ami-x", idempotency_token=f"tok-{name}"
    )


@pytest.mark.integration
async def test_irsa_web_identity_through_sts(
    moto: MotoServer, bare_chain: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What EKS injects for a service account with a role: a token file and a role ARN. The
    chain exchanges them at STS (moto's here) for temporary keys."""
    token = bare_chain / "token"
    token.write_text("eyJhbGciOiJSUzI1NiJ9.e30.c2lnbmF0dXJl")
    monkeypatch.setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/kubeloop-operator")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(token))
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", moto.endpoint_url)
    assert await aws_environment_problems() == []
    async with AwsCloud(endpoint_url=moto.endpoint_url) as aws:
        vm = await aws.create(request("irsa"))
        assert [v.id for v in await aws.list({})] == [vm.id]
        assert aws.region == "us-west-2"


@pytest.mark.integration
async def test_a_named_profile_from_the_shared_files(moto: MotoServer, bare_chain: Path) -> None:
    (bare_chain / "config").write_text("[profile ops]\nregion = ap-southeast-2\n")
    (bare_chain / "credentials").write_text(
        "[ops]\naws_access_key_id = AKIDOPS\naws_secret_access_key = secret\n"
    )
    assert await aws_environment_problems(profile="ops") == []
    assert await aws_environment_problems() != [], "without the profile there is nothing"
    async with AwsCloud(profile="ops", endpoint_url=moto.endpoint_url) as aws:
        assert aws.region == "ap-southeast-2"
        vm = await aws.create(request("profile"))
        assert (await aws.describe(vm.id)).id == vm.id


@pytest.mark.integration
async def test_regions_are_separate(moto: MotoServer) -> None:
    async with (
        AwsCloud(region="eu-central-1", endpoint_url=moto.endpoint_url) as frankfurt,
        AwsCloud(region="us-east-1", endpoint_url=moto.endpoint_url) as virginia,
    ):
        vm = await frankfurt.create(request("fra"))
        assert [v.id for v in await frankfurt.list({})] == [vm.id]
        assert await virginia.list({}) == []
        assert frankfurt.region == "eu-central-1"

"""Intents: names and the create request that must be the same every time it is sent."""

from __future__ import annotations

import itertools
from dataclasses import replace

from nodepool_operator.api import parse_nodeclass
from nodepool_operator.cloud import MAX_TOKEN_LENGTH
from nodepool_operator.controllers.nodepool._intent import (
    NODE_IMAGE,
    create_request,
    idempotency_token,
    new_intents,
)
from nodepool_operator.controllers.nodepool._launch_record import CLASS_HASH_TAG, class_hash


def test_new_intents_are_creating_records_with_fresh_names() -> None:
    intents = new_intents("web", 3, taken={"web-aaaaa"})
    assert len(intents) == 3
    assert all(r.state == "creating" and r.instance_id is None for r in intents)
    names = [r.name for r in intents]
    assert len(set(names)) == 3
    assert all(n.startswith("web-") and len(n) == len("web-") + 5 for n in names)
    assert "web-aaaaa" not in names


def test_new_intents_skip_taken_and_repeated_names() -> None:
    hexes = itertools.chain(["aaaaaa", "aaaaaa", "bbbbbb", "cccccc"])
    intents = new_intents("p", 2, taken={"p-bbbbb"}, token_hex=lambda n: next(hexes))
    assert [r.name for r in intents] == ["p-aaaaa", "p-ccccc"]


def test_long_pool_names_keep_node_names_within_a_label_value() -> None:
    (intent,) = new_intents("a" * 100, 1, taken=())
    assert len(intent.name) <= 63


def test_create_request_is_stable_and_tagged_with_name_and_uid() -> None:
    first = create_request(pool_name="web", pool_uid="u-1", instance_type="m5.large", name="web-1")
    again = create_request(pool_name="web", pool_uid="u-1", instance_type="m5.large", name="web-1")
    assert first == again
    assert first.idempotency_token == idempotency_token("u-1", "web-1")
    assert first.tags == {
        "kubeloop.dev/nodepool": "web",
        "kubeloop.dev/nodepool-uid": "u-1",
        CLASS_HASH_TAG: class_hash(None),  # the launch's record, for drift
    }
    assert first.image == NODE_IMAGE
    other_incarnation = create_request(
        pool_name="web", pool_uid="u-2", instance_type="m5.large", name="web-1"
    )
    assert other_incarnation.idempotency_token != first.idempotency_token


def test_tokens_fit_ec2s_client_token_limit_for_the_longest_names() -> None:
    """A 36-character uid and a 63-character name made ``uid/name`` 100 characters; EC2 takes
    at most 64, so the token is a hash (and still one per pool incarnation and name)."""
    uid = "0f8fad5b-d9cb-469f-a165-70867728950e"
    (intent,) = new_intents("a" * 100, 1, taken=())
    token = idempotency_token(uid, intent.name)
    assert len(token) <= MAX_TOKEN_LENGTH
    assert token.isascii()
    assert token.isprintable()
    assert token != idempotency_token(uid, intent.name[:-1] + "x")
    assert token != idempotency_token(uid[:-1] + "f", intent.name)


def test_a_node_class_gives_the_request_its_image_launch_settings_and_tags() -> None:
    spec = parse_nodeclass(
        {
            "spec": {
                "amiSsmParameter": "/eks/ami",
                "amiFamily": "Custom",
                "subnetIds": ["subnet-0123abcd"],
                "securityGroupIds": ["sg-0123abcd"],
                "instanceProfile": "nodes",
                "userData": "join ${nodeName} ${poolName} ${instanceType} $HOME",
                "tags": {"team": "a"},
            }
        }
    ).spec
    first = create_request(
        pool_name="web", pool_uid="u-1", instance_type="m5.large", name="web-1", node_class=spec
    )
    again = create_request(
        pool_name="web", pool_uid="u-1", instance_type="m5.large", name="web-1", node_class=spec
    )
    assert first == again, "the same request every time it is sent"
    assert first.image == "resolve:ssm:/eks/ami"
    assert first.launch.subnets == ("subnet-0123abcd",)
    assert first.launch.security_groups == ("sg-0123abcd",)
    assert first.launch.instance_profile == "nodes"
    assert first.user_data == "join web-1 web m5.large $HOME", "a Custom class's script wins"
    assert first.tags == {
        "team": "a",
        "kubeloop.dev/nodepool": "web",
        "kubeloop.dev/nodepool-uid": "u-1",
        CLASS_HASH_TAG: class_hash(spec),
    }
    other_vm = create_request(
        pool_name="web", pool_uid="u-1", instance_type="m5.large", name="web-2", node_class=spec
    )
    assert other_vm.user_data == "join web-2 web m5.large $HOME"
    plain = create_request(
        pool_name="web", pool_uid="u-1", instance_type="m5.large", name="web-3", user_data="boot"
    )
    assert plain.user_data == "boot", "without a class, the node bootstrap is the user data"
    al2023 = create_request(
        pool_name="web",
        pool_uid="u-1",
        instance_type="m5.large",
        name="web-4",
        user_data="merged",
        node_class=replace(spec, ami_family="AL2023"),
    )
    assert al2023.user_data == "merged", "AL2023: the class's script is merged already"

"""Which labels put a pool's Nodes in the operator's scope."""

from __future__ import annotations

import pytest

from nodepool_operator.controllers._scope import equality_labels, node_selector


@pytest.mark.parametrize(
    ("selector", "labels"),
    [
        (None, {}),
        ("", {}),
        ("run=ab", {"run": "ab"}),
        ("run==ab", {"run": "ab"}),
        ("a=1, b = 2", {"a": "1", "b": "2"}),
        ("tier in (x,y),run=ab", {"run": "ab"}),
        ("a!=1,b,!c,d notin (e)", {}),
    ],
)
def test_equality_labels(selector: str | None, labels: dict[str, str]) -> None:
    assert equality_labels(selector) == labels


def test_a_selector_kubeloop_cannot_parse_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"label selector 'run=a,x>y'"):
        equality_labels("run=a,x>y")


def test_node_selector_requires_the_pool_label() -> None:
    assert node_selector({}) == "kubeloop.dev/nodepool"
    assert node_selector({"b": "2", "a": "1"}) == "kubeloop.dev/nodepool,a=1,b=2"

"""The in-memory label selector: the apiserver's string grammar, and the byte needles that
let the store skip objects undecoded (never one that matches)."""

from __future__ import annotations

import msgspec
import pytest

from kubeloop import LabelSelector, parse_label_selector
from kubeloop._labelselector import parse


def cm(**labels: str) -> dict[str, object]:
    return {"metadata": {"name": "x", "labels": labels}}


@pytest.mark.parametrize(
    ("selector", "labels", "want"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("app in (web, db)", {"app": "db"}, True),
        ("app notin (web)", {}, True),
        ("app", {"app": ""}, True),
        ("!app", {"app": "x"}, False),
        ("size>3", {"size": "4"}, True),
        ("size<3", {"size": "x"}, False),
        (
            "app.kubernetes.io/name=web,tier in (a)",
            {"app.kubernetes.io/name": "web", "tier": "a"},
            True,
        ),
        ("", {}, True),
    ],
)
def test_matches_as_the_apiserver(selector: str, labels: dict[str, str], want: bool) -> None:
    sel = parse(selector)
    obj = cm(**labels)
    assert sel.matches(obj) is want
    if want:  # a matching object's JSON holds every needle
        data = msgspec.json.encode(obj)
        assert all(n in data for n in sel.needles)


def test_a_malformed_selector_names_itself() -> None:
    with pytest.raises(ValueError, match="app=\\(x"):
        parse("app=(x")


def test_equalities_are_the_key_value_requirements_in_order() -> None:
    selector = parse_label_selector("b=2, tier in (x), a==1, c!=3, d")
    assert selector.equalities == (("b", "2"), ("a", "1"))
    assert isinstance(selector, LabelSelector)

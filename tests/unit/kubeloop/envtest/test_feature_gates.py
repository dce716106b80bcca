"""``ControlPlaneOptions.feature_gates``: one ``--feature-gates`` flag, bad entries refused
by field name before any component starts."""

from __future__ import annotations

from typing import Any

import pytest

from kubeloop.envtest import EnvtestError
from kubeloop.envtest._controlplane import feature_gates_flag


def test_no_gates_no_flag() -> None:
    assert feature_gates_flag({}) == []


def test_gates_become_one_sorted_flag() -> None:
    flag = feature_gates_flag({"ZGate": False, "AGate": True})
    assert flag == ["--feature-gates=AGate=true,ZGate=false"]


@pytest.mark.parametrize(
    "gates",
    [{"not a gate": True}, {"": True}, {"Gate=x": True}, {"Gate": "true"}, {"Gate": 1}],
    ids=["space", "empty", "equals", "string-value", "int-value"],
)
def test_a_bad_entry_is_refused_naming_the_field(gates: dict[str, Any]) -> None:
    with pytest.raises(EnvtestError, match=r"ControlPlaneOptions\.feature_gates"):
        feature_gates_flag(gates)

"""bench.crd_parse runs and compares like with like: its msgspec mirror reads the benchmark's
NodePool to the same values as kubeloop.crd's parser, and refuses what the markers refuse."""

from __future__ import annotations

import json
import sys

import msgspec
import pytest
from bench import crd_parse

from nodepool_operator.api import NodePool


def test_the_mirror_enforces_the_markers() -> None:
    struct = crd_parse.struct_of(NodePool, {})
    bad = {**crd_parse.POOL, "spec": {**crd_parse.POOL["spec"], "maxNodes": 0}}
    with pytest.raises(msgspec.ValidationError, match=r"\$\.spec\.maxNodes"):
        msgspec.convert(bad, struct, str_keys=True)


def test_it_prints_one_line_with_both_figures(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "argv", ["crd_parse", "--rounds", "3"])
    crd_parse.main()
    line = json.loads(capsys.readouterr().out)
    assert set(line) == {
        "dataclass_parse_us",
        "struct_parse_us",
        "msgspec_struct_convert_us",
        "ratio",
    }

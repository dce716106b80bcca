"""``nodepool-operator demo --cloud aws`` end to end, as a user runs it: a subprocess with its
own cluster and its own moto EC2 server, the operator's AwsCloud talking to it.

The oracle for VMs is moto's DescribeInstances at the end of the run, which the demo writes
to ``cloud.json`` in the report directory (every instance, terminated ones too, with the
tags EC2 holds), recounted here rather than taken from the demo's figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from tests._nodeadm import nodeadm_check

pytestmark = pytest.mark.integration

DEMO_TIMEOUT = 180


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    report = tmp_path_factory.mktemp("demo-aws")
    argv = [sys.executable, "-m", "nodepool_operator", "demo", "--cloud", "aws"]
    argv += ["--headless", "--json", "--timeout", str(DEMO_TIMEOUT), "--report", str(report)]
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=DEMO_TIMEOUT + 240, check=False
    )
    context = f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    assert proc.returncode == 0, context
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 1, context
    assert "AwsNodeClass" in proc.stderr, context
    cloud = json.loads((report / "cloud.json").read_text())
    return json.loads(lines[0]), cloud


def test_every_fitting_pod_is_scheduled_on_the_fewest_nodes(
    demo: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    figures, _ = demo
    assert figures["pods_scheduled"] == figures["pods_fitting"] == 13
    assert figures["nodes"] == figures["nodes_lower_bound"] == 3
    assert figures["pods_not_triggering"] == 4


def test_moto_holds_one_instance_per_node_and_no_duplicates_or_leaks(
    demo: tuple[dict[str, Any], dict[str, Any]],
) -> None:
    """At the end of both acts: one instance per node of the scale-up, the drained ones
    terminated, the rest running, none launched twice or thrown away; each booted with AL2023
    user data the real nodeadm accepts."""
    figures, cloud = demo
    assert cloud["cloud"] == "aws"
    instances = cloud["instances"]
    assert len(instances) == figures["nodes"] == 3, "no instance was launched and thrown away"
    assert all(i["type"] == "c5.12xlarge" for i in instances)
    assert Counter(i["name"] for i in instances) == Counter({i["name"]: 1 for i in instances})
    live = [i for i in instances if i["state"] != "terminated"]
    assert figures["nodes_drained"] >= 1
    assert len(live) == figures["nodes"] - figures["nodes_drained"]
    assert cloud["duplicates"] == 0
    assert (figures["duplicate_vms"], figures["leaked_vms"]) == (0, 0)
    assert figures["pods_running"] == figures["pods_fitting"]
    # what EC2 holds for each instance (DescribeInstanceAttribute, in cloud.json): the
    # operator's NodeConfig, which the real nodeadm takes
    for instance in instances:
        assert "kind: NodeConfig" in instance["user_data"], instance["id"]
        nodeadm_check(instance["user_data"])

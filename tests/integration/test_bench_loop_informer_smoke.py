"""The loop and informer_scale benchmarks cannot rot: one tiny case each, end to end.

Runs ``bench/run.py --quick --only loop`` (a few seconds per mode) and ``--only
informer_scale`` (a couple of hundred objects) against the session control plane, as a user
would, and checks the JSON line and the docs block. No speed is asserted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from bench.throughput import SAMPLES

from kubeloop import PODS, Client, Resource
from kubeloop.envtest import ControlPlane
from tests.integration.bench_support import run_quick

pytestmark = [pytest.mark.integration, pytest.mark.bench]


def test_loop_quick_smoke(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    result = run_quick(
        kube_control_plane.kubeconfig,
        docs,
        "--only",
        "loop",
        "--param",
        "seconds=4.0",
        timeout=180,
    )
    assert result["name"] == "loop"
    assert result["params"]["seconds_per_mode"] == 4.0
    assert result["params"]["commit"]
    without = result["figures"]["without_predicate"]
    with_pred = result["figures"]["with_generation_changed"]
    # The loop trap: without the predicate every own write triggers the next reconcile, so it
    # reconciles far more often than the requeue (1 + 4 s / 2 s + 1 spec change = 4) allows.
    assert without["loop_detected"] is True
    assert with_pred["loop_detected"] is False
    assert without["reconciles"] > 4 * with_pred["reconciles"]
    assert (
        1 <= with_pred["reconciles"] <= result["figures"]["expected_reconciles_with_predicate"] + 1
    )
    text = docs.read_text()
    assert "<!-- bench:loop:begin -->" in text
    assert f"at commit `{result['params']['commit']}`" in text


def test_informer_scale_quick_smoke(kube_control_plane: ControlPlane, tmp_path: Path) -> None:
    docs = tmp_path / "benchmarks.md"
    result = run_quick(
        kube_control_plane.kubeconfig,
        docs,
        "--only",
        "informer_scale",
        "--objects",
        "200",
        "--param",
        "updates=100",
        timeout=240,
    )
    assert result["name"] == "informer_scale"
    figures = result["figures"]
    assert result["params"]["objects"] == 200
    assert figures["cached"] == 200
    assert figures["updates_sent"] == 100
    # every update reached the cache, and the cache agrees with a live LIST
    assert figures["updates_missing"] == 0
    assert figures["rv_mismatches"] == 0
    assert figures["kept_up"] is True
    assert figures["bytes_per_cached_object"] > 0
    assert set(figures["targets"]) == {"bytes_per_object_at_most_1536", "no_sync_stall_over_50ms"}
    # a standby holding the objects (issue 23, item 4): its loop detector keeps no event
    standby = figures["standby"]
    assert (standby["objects"], standby["updates"]) == (200, 100)
    assert standby["reconciles"] == 0
    assert standby["pending_requests"] == 200
    assert standby["loop_detector_decoded_objects"] == 0
    assert 0 < standby["loop_detector_bytes_per_object"] < 1024
    # the objects are gone afterwards: the apiserver's LIST says so, not only the figures
    assert figures["cleaned_up"] is True
    left = asyncio.run(_left(kube_control_plane, SAMPLES, result["params"]["namespace"]))
    assert left == 0
    # Pods cached whole and metadata-only (issue 23, item 3), as many as the Samples
    pods = figures["pods"]
    assert result["params"]["pods"] == 200
    assert (pods["objects"], pods["full_cached"], pods["metadata_only_cached"]) == (200, 200, 200)
    assert pods["full_kinds"] == ["Pod"]
    assert pods["metadata_only_kinds"] == ["PartialObjectMetadata"]
    # a Pod's metadata is a fraction of it (the spec is most of it); memory is RSS: a
    # number at this size, compared only at scale
    assert 0 < pods["metadata_only_json_bytes_per_object"] < pods["full_json_bytes_per_object"] / 2
    assert isinstance(pods["metadata_only_bytes_per_cached_object"], float)
    assert isinstance(pods["full_bytes_per_cached_object"], float)
    assert pods["cleaned_up"] is True
    assert asyncio.run(_left(kube_control_plane, PODS, pods["namespace"])) == 0
    text = docs.read_text()
    assert "<!-- bench:informer_scale:begin -->" in text
    assert "memory per cached object" in text
    assert "loop detector's tables" in text
    assert "metadata only (`PartialObjectMetadata`)" in text


async def _left(control_plane: ControlPlane, resource: Resource, namespace: str) -> int:
    async with Client.from_kubeconfig(control_plane.kubeconfig, qps=None) as client:
        items, _ = await client.list_all(resource, namespace)
    return len(items)

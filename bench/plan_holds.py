"""Does the plan hold by default? S1, S2 and S3 at full size, side ``ours`` (the operator's
default settings, no ``reserveNewNodes``), on one control plane per kube-scheduler scoring
profile (``LeastAllocated``, the default, then ``MostAllocated``): the nodes each ends with
against the proven optimum, the targetNodes history, how the scheduler filled the nodes and
the operator's writes to pods. The figures of ``docs/benchmarks.md``, "The plan holds by
default".

By hand (about 15 minutes on 2 cores)::

    python -m bench.plan_holds [--scenarios S2] [--scorings MostAllocated] [--repeats 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from pathlib import Path
from typing import Any

from bench._real_cluster import add_system_node, real_cluster_timing
from bench.autoscaler_scenarios import NAIVE_FREQUENCY_S, expected, run_side, scenarios
from kubeloop import Client
from kubeloop.envtest import ControlPlane, ControlPlaneOptions
from nodepool_operator.api import crds
from nodepool_operator.crdinstall import install_crds

SCORINGS = ("LeastAllocated", "MostAllocated")


async def one_profile(scoring: str, sids: list[str], repeats: int) -> list[dict[str, Any]]:
    """Each scenario ``repeats`` times on a fresh control plane scoring ``scoring``."""
    options = ControlPlaneOptions(scheduler=True, controller_manager=True, kwok=True)
    options.scheduler_scoring = scoring
    table = scenarios(quick=False)
    rows: list[dict[str, Any]] = []
    # the cluster as a real one is (bench._real_cluster): a tainted system node, the node
    # lifecycle timing at the upstream defaults
    cp = await asyncio.to_thread(ControlPlane, real_cluster_timing(options))
    await asyncio.to_thread(cp.start)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-plan-holds-") as tmp:
            async with Client.from_kubeconfig(cp.kubeconfig, field_manager="bench") as admin:
                await add_system_node(admin)
                await install_crds(admin, crds())
                for _ in range(repeats):
                    for sid in sids:
                        sc = table[sid]
                        fig = await run_side(
                            cp.kubeconfig, admin, sc, "ours", Path(tmp), NAIVE_FREQUENCY_S
                        )
                        row = {
                            "scoring": scoring,
                            "scenario": sid,
                            "optimum": expected(sc).optimum,
                            "nodes": fig["nodes"],
                            "targets_seen": fig["targets_seen"],
                            "all_scheduled_s": fig["all_scheduled_s"],
                            "node_mix": fig.get("node_mix"),
                            "pod_writes": {
                                k: n
                                for k, n in fig["api_writes_by_target"].items()
                                if k.split(" ")[-1].split("/")[0] == "pods"
                            },
                        }
                        print(json.dumps(row), flush=True)
                        rows.append(row)
    finally:
        await asyncio.to_thread(cp.stop)
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | kube-scheduler scoring | nodes (optimum) | targetNodes | "
        "pods per node: nodes | operator writes to pods |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        mix = "; ".join(f"{k}: {n}" for k, n in (r["node_mix"] or {}).items()) or "–"
        writes = ", ".join(f"{k}: {n}" for k, n in r["pod_writes"].items()) or "none"
        raises = " → ".join(str(v) for v in r["targets_seen"])
        lines.append(
            f"| {r['scenario']} | {r['scoring']} | {r['nodes']} ({r['optimum']}) | {raises} | "
            f"{mix} | {writes} |"
        )
    return "\n".join(lines)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scenarios", default="S1,S2,S3")
    parser.add_argument("--scorings", default=",".join(SCORINGS))
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    sids = [s.strip().upper() for s in args.scenarios.split(",") if s.strip()]
    rows: list[dict[str, Any]] = []
    for scoring in (s.strip() for s in args.scorings.split(",") if s.strip()):
        rows += await one_profile(scoring, sids, args.repeats)
    print(markdown(rows))


if __name__ == "__main__":
    asyncio.run(main())

"""The benchmarks' real nodes (issue 21): the packing and autoscaler scenarios that plan on an
AL2023 node take the allocatable the product computes for it, and their optimum is computed on
that same allocatable, not on the synthetic node's."""

from __future__ import annotations

from bench.autoscaler_scenarios import (
    Names,
    expected,
    nodeclass_manifest,
    pool_manifest,
    scenarios,
)
from bench.packing import (
    REAL_TYPES,
    TEMPLATE,
    describe_allocatable,
    make_workload,
    real_template,
)

from nodepool_operator.api import parse_nodeclass


def test_the_real_nodes_are_sized_as_eks_sizes_them() -> None:
    # vCPUs less EKS's kube-reserved CPU (6% of the first core, 1% of the second, 0.5% of the
    # next two); ENI max pods: ENIs * (IPs per ENI - 1) + 2
    assert describe_allocatable(real_template("m5.xlarge")) == {
        "cpu": "3920m",
        "memory": "15Gi",
        "ephemeral-storage": "17Gi",
        "pods": 58,
    }
    r5 = describe_allocatable(real_template("r5.2xlarge"))
    assert (r5["cpu"], r5["pods"]) == ("7910m", 58)
    assert set(REAL_TYPES) == {"m5.xlarge", "r5.2xlarge"}


def test_a_real_node_workload_is_drawn_from_its_own_allocatable() -> None:
    template = real_template("m5.xlarge")
    for index in range(15):
        w = make_workload(index, 1, template)
        synthetic = make_workload(index, 1)
        assert w.template is template
        assert synthetic.template is TEMPLATE
        # the same workload (shape, count) scaled to the node: every pod fits an empty one
        assert (w.dims, w.shape) == (synthetic.dims, synthetic.shape)
        assert len(w.pods) == len(synthetic.pods)
        assert w.max_pods == 58
        names = ("memory",) if w.dims == 1 else ("cpu", "memory", "ephemeral-storage")[: w.dims]
        steps = {"cpu": 100, "memory": 512 * 1024**2, "ephemeral-storage": 1024**3}
        for pod in w.pods:
            for name, amount in zip(names, pod, strict=True):
                assert amount * steps[name] <= template.allocatable.get(name)


def test_s16_plans_on_the_al2023_node_and_its_optimum_too() -> None:
    sc = scenarios(quick=True)["S16"]
    names = Names("S16", "ours", "abc")
    pool = pool_manifest(sc, names)["spec"]
    assert pool["nodeClassRef"] == {"name": names.base}
    # the type's node, not an override
    assert "cpu" not in pool
    assert "memory" not in pool
    assert parse_nodeclass(nodeclass_manifest(sc, names)).spec.ami_family == "AL2023"
    exp = expected(sc)
    assert exp.allocatable == {"cpu": "3920m", "memory": "15Gi", "pods": "58"}
    # 9 pods of 1 CPU / 3Gi and 8 of 300m / 2Gi: 11.4 CPUs and 43Gi on 3.92 / 15Gi nodes
    assert (exp.lower_bound, exp.optimum, exp.fitting) == (3, 3, 17)
    full = expected(scenarios(quick=False)["S16"])
    assert (full.lower_bound, full.optimum, full.fitting) == (7, 7, 42)

"""How often a pending pod's data comes back to a module it left, from the Autoscaler's
reconcile to its targetNodes write (issue 20), measured by ``tools/pod_path.py`` over one
in-process reconcile; the figure is in docs/architecture.md.

Issue 20's criterion: the data comes back to no module more than once after leaving it. The
data starts in observe (it reads each pod from the cache, at the boundary:
``scheduling.read_pending``), reaches the reconcile when observe returns, goes to decide,
which hands the pods to the simulation once (``plan_scale_up``: one call into the packing,
which admits the pods, packs first-fit-decreasing and searches for fewer nodes), comes back to
the reconcile and goes to act. The tool's rule is checked on hand-made modules below: a module
that hands the data out twice, and a recipe handed the data that calls three steps with it,
are both caught.
"""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[3] / "tools" / "pod_path.py"
P = "nodepool_operator."

#: Where the pod is read (its dict, then its view): entered once, left once.
BOUNDARY = (P + "scheduling._pods",)
#: The recipe's steps, each entered once: observe (which reads each pod at the boundary),
#: decide (which hands the pods to the simulation once), act (the target write).
STEPS = (
    P + "controllers.autoscaler.observe",
    P + "controllers.autoscaler.decide",
    P + "controllers.autoscaler.act",
)


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pod_path", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pod_path"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_pending_pods_path_re_enters_no_module_more_than_once() -> None:
    pod_path = _tool()
    path, writes = pod_path.follow()
    scale = [w for w in writes if w.subresource == "scale"]
    assert [(w.verb, w.name, w.body["spec"]["replicas"]) for w in scale] == [("update", "pool", 1)]
    assert path.wrote
    # the data starts where the pod is read, not in the reconcile, which asks observe with a
    # Request and gets the data back from it
    assert path.modules[:4] == [STEPS[0], *BOUNDARY, STEPS[0], pod_path.RECIPE]
    assert path.modules[-1] == P + "controllers.autoscaler._scale"
    # the recipe: observe, decide and act, each called once
    assert [m for m in path.modules if m in STEPS or m == pod_path.RECIPE] == [
        STEPS[0],
        STEPS[0],  # back from the boundary
        pod_path.RECIPE,
        STEPS[1],
        STEPS[1],  # back from the simulation
        pod_path.RECIPE,
        STEPS[2],
    ]
    # the simulation's recipe makes one call (the packing), which makes one (first fit),
    # which makes one (the fit check)
    simulation = [m.removeprefix(P + "scheduling.") for m in path.modules if "scheduling." in m]
    assert simulation == [
        *("_pods", "_binpack", "_exact", "_firstfit", "_fit"),
        *("_firstfit", "_exact", "_binpack"),
    ]


def test_issue_20s_criterion_in_full() -> None:
    path, _ = _tool().follow()
    assert path.wrote
    assert max(path.reentries.values(), default=0) <= 1


def test_a_records_own_methods_are_not_rooms_but_getters_are() -> None:
    """Reading the pod's view (its properties, its requests' arithmetic) keeps the data where
    it is; a call of another module's function with it (a getter) moves it there."""
    pod_path = _tool()
    strict, _ = pod_path.follow(strict=True)
    path, _ = pod_path.follow()
    assert set(path.modules) < set(strict.modules)
    assert sum(path.reentries.values()) < sum(strict.reentries.values())
    assert P + "scheduling._quantity" in strict.reentries  # Resources' own arithmetic


def test_the_follower_counts_a_return_to_a_module_left_before() -> None:
    pod_path = _tool()
    path = pod_path.PodPath(modules=["a", "b", "a", "c", "b", "a"])
    assert dict(path.reentries) == {"a": 2, "b": 1}


#: Hand-made modules for the follower: ``road`` is the runtime (its cache holds the pod),
#: the others are "ours" (``handmade.*``). ``write.write`` ends the path.
HANDMADE = {
    "road": """
        POD = {"metadata": {"name": "p"}, "spec": {"cpu": 1}}
        def get(key):
            return POD
        """,
    "handmade.read": """
        def view(pod):
            return {"cpu": pod["spec"]["cpu"], "pod": pod}
        """,
    "handmade.observe": """
        import road
        from handmade import read
        def look(req):
            return read.view(road.get(req))
        """,
    "handmade.fit": """
        def check(view):
            return {"fits": view.get("cpu", 0) < 2, "view": view}
        """,
    "handmade.pack": """
        def pack(view):
            return [view]
        """,
    "handmade.write": """
        def write(plan):
            return None
        """,
    "handmade.recipe": """
        from handmade import observe, decide, write, fit, pack
        def reconcile(req):
            write.write(decide.decide(observe.look(req)))
        def handed(pod):  # a recipe handed the pod itself, calling three steps with it
            fit.check(pod)
            pack.pack(pod)
            write.write(pod)
        """,
    "handmade.decide": """
        from handmade import fit, pack
        def decide(view):  # one call: the data comes back once
            return pack.pack(view)
        """,
    "handmade.pingpong": """
        from handmade import fit, pack
        def decide(view):  # the fit check, then the packing: the data comes back twice
            fit.check(view)
            return pack.pack(view)
        """,
}


def _handmade(entry: str, decide: str = "decide") -> list[str]:
    """The path the follower finds through the hand-made modules, from ``recipe.<entry>``,
    with ``decide`` as the decide step's module."""
    pod_path = _tool()
    package = sys.modules["handmade"] = ModuleType("handmade")
    for name in HANDMADE:  # all made before any runs: they import each other
        sys.modules[name] = ModuleType(name)
        setattr(package, name.removeprefix("handmade."), sys.modules[name])
    for name, source in HANDMADE.items():
        exec(textwrap.dedent(source), sys.modules[name].__dict__)
    recipe = sys.modules["handmade.recipe"]
    setattr(recipe, "decide", sys.modules[f"handmade.{decide}"])  # noqa: B010 - made above
    run: Callable[[object], None] = getattr(recipe, entry)
    follower = pod_path._Follower(
        package="handmade.",
        start=("handmade.recipe", entry),
        end=("handmade.write", "write"),
        pod="p",
    )
    sys.setprofile(follower)
    try:
        run(sys.modules["road"].POD if entry == "handed" else "a-request")
    finally:
        sys.setprofile(None)
        for name in (*HANDMADE, "handmade"):
            sys.modules.pop(name, None)
    assert follower.path.wrote
    return [m.removeprefix("handmade.") for m in follower.path.modules]


def test_the_path_starts_where_the_data_is_read_and_a_recipe_comes_back_once() -> None:
    path = _handmade("reconcile")
    assert path == [
        *("observe", "read", "observe", "recipe"),
        *("decide", "pack", "decide", "recipe", "write"),
    ]
    assert max(_tool().PodPath(modules=path).reentries.values()) == 1


def test_a_module_handing_the_data_out_twice_is_caught() -> None:
    path = _handmade("reconcile", decide="pingpong")
    assert path[4:9] == ["pingpong", "fit", "pingpong", "pack", "pingpong"]
    assert _tool().PodPath(modules=path).reentries["pingpong"] == 2


def test_a_recipe_handed_the_data_comes_back_after_each_step() -> None:
    path = _handmade("handed")
    assert path == ["recipe", "fit", "recipe", "pack", "recipe", "write"]
    assert _tool().PodPath(modules=path).reentries["recipe"] == 2

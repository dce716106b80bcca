"""How often a pending pod's data comes back to a module it left, from the Autoscaler's
reconcile to its targetNodes write (issue 20), measured by ``tools/pod_path.py`` over one
in-process reconcile; the figure is in docs/architecture.md.

Issue 20's criterion: the data comes back to no module more than once after leaving it. The
pod's view is read once, in ``scheduling._pods``, and the plan reads its attributes; the
modules it still comes back to more often are listed with their counts, so a getter round trip
coming back, or any module newly visited twice, fails here. Shorten the list as the path gets
shorter.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[3] / "tools" / "pod_path.py"
P = "nodepool_operator."

#: The modules the data still comes back to more than once (issue 20's criterion fails for
#: these), with how often: the observe step reads each pod through four calls (classify, key,
#: view, needs), the decide step hands the candidates to four helpers in turn (``_pending``,
#: ``_landing``, the plan, ``_texts``), the plan to the fit check and the exact search, and
#: the reconcile's module is the recipe, coming back between its steps (four: after observe,
#: after the burst wait, after the decision, each of the two in a worker thread that the
#: follower traces back to the frame that handed it over). Anything else
#: (the getter round trips of the pod's view, above all) comes back at most once.
STILL_MORE_THAN_ONCE = {
    P + "controllers.autoscaler.observe": 5,
    P + "controllers.autoscaler.decide": 5,
    P + "controllers.autoscaler.controller": 4,
    P + "scheduling._binpack": 2,
}
#: Where the pod is read (its dict, then its view): entered once, left once.
BOUNDARY = (
    P + "scheduling._pods",
    P + "scheduling._views",
    P + "scheduling._quantity",
    P + "controllers.autoscaler._decode",
)


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pod_path", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pod_path"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_pending_pods_path_comes_back_to_no_module_more_than_once_but_the_known_ones() -> None:
    pod_path = _tool()
    path, writes = pod_path.follow()
    scale = [w for w in writes if w.subresource == "scale"]
    assert [(w.verb, w.name, w.body["spec"]["replicas"]) for w in scale] == [("update", "pool", 1)]
    assert path.wrote
    assert path.modules[0] == P + "controllers.autoscaler.controller"
    assert path.modules[-1] == P + "controllers.autoscaler._scale"
    again = path.reentries
    assert {m: again[m] for m in BOUNDARY if again[m] > 1} == {}, "the view's round trips are back"
    assert {m: n for m, n in again.items() if n > 1} == STILL_MORE_THAN_ONCE


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
    recipe = pod_path.RECIPE
    path = pod_path.PodPath(modules=[recipe, "x", recipe, "y", "x"])
    assert dict(path.outside_the_recipe) == {"x": 1}

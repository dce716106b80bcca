"""How often a pending pod's data comes back to a module it left, from the Autoscaler's
reconcile to its targetNodes write (issue 20), measured by ``tools/pod_path.py`` over one
in-process reconcile; the figure is in docs/architecture.md.

Today's counts are a ceiling: a module the data did not come back to before, or one it
comes back to more often, fails here. Lower them here when the path gets shorter.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TOOL = Path(__file__).resolve().parents[3] / "tools" / "pod_path.py"
P = "nodepool_operator."

#: module -> returns to it after the data left it (the reconcile's module: between steps).
CEILING = {
    P + "scheduling._pods": 50,
    P + "scheduling._views": 40,
    P + "controllers.autoscaler.decide": 22,
    P + "scheduling._binpack": 22,
    P + "scheduling._quantity": 20,
    P + "scheduling._exact": 14,
    P + "controllers.autoscaler.observe": 11,
    P + "controllers.autoscaler._landing": 7,
    P + "controllers.autoscaler._decode": 4,
    P + "controllers.autoscaler.controller": 4,
    P + "scheduling._fit": 4,
    P + "controllers.autoscaler._pending": 2,
    P + "controllers.autoscaler._batching": 1,
    P + "controllers.autoscaler._texts": 1,
}


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("pod_path", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pod_path"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_pending_pods_path_to_the_target_write_comes_back_no_more_than_today() -> None:
    pod_path = _tool()
    path, writes = pod_path.follow()
    scale = [w for w in writes if w.subresource == "scale"]
    assert [(w.verb, w.name, w.body["spec"]["replicas"]) for w in scale] == [("update", "pool", 1)]
    assert path.wrote
    assert path.modules[0] == P + "controllers.autoscaler.controller"
    assert path.modules[-1] == P + "controllers.autoscaler._scale"
    again = dict(path.reentries)
    assert set(again) <= set(CEILING), f"the data now comes back to {set(again) - set(CEILING)}"
    grown = {m: (n, CEILING[m]) for m, n in again.items() if n > CEILING[m]}
    assert grown == {}, "module: (returns now, the ceiling)"


def test_the_follower_counts_a_return_to_a_module_left_before() -> None:
    pod_path = _tool()
    path = pod_path.PodPath(modules=["a", "b", "a", "c", "b", "a"])
    assert dict(path.reentries) == {"a": 2, "b": 1}
    recipe = pod_path.RECIPE
    path = pod_path.PodPath(modules=[recipe, "x", recipe, "y", "x"])
    assert dict(path.outside_the_recipe) == {"x": 1}

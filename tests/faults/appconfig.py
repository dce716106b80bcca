"""examples/configmap_child/appconfig_operator.py, importable (examples are not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "configmap_child" / "appconfig_operator.py"
)


def _load() -> ModuleType:
    name = "kubeloop_example_appconfig"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


_example = _load()
APPCONFIG_CRD = _example.APPCONFIG_CRD
APPCONFIGS = _example.APPCONFIGS
CHILD_LABEL: str = _example.CHILD_LABEL
FIELD_MANAGER: str = _example.FIELD_MANAGER
install_crd = _example.install_crd
owner_uid = _example.owner_uid
build_manager = _example.build_manager
child_of = _example.child_of

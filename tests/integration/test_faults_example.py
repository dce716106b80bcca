"""The worked example of the fault kit (``examples/faults``) runs as part of the suite,
so the documented way of testing an operator under faults keeps working."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = (
    Path(__file__).resolve().parents[2] / "examples" / "faults" / "test_mirror_under_faults.py"
)

_spec = importlib.util.spec_from_file_location("kubeloop_example_faults", EXAMPLE)
assert _spec is not None
assert _spec.loader is not None
_example = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_example)

pytestmark = pytest.mark.integration

test_mirror_operator_survives_api_faults = _example.test_mirror_operator_survives_api_faults

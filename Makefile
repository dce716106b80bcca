# kubeloop: `make demo` (the main job) and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
export UV_PYTHON_DOWNLOADS := never
UV := $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
PY := .venv/bin/python

.PHONY: setup controlplane test lint typecheck pytest demo manifests bench faults clean

## setup: the venv with dev dependencies, and the control-plane binaries (built once, cached)
setup: .venv/.synced controlplane

$(UV):
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

.venv/.synced: pyproject.toml uv.lock | $(UV)
	@UV=$$(command -v uv || echo $(HOME)/.local/bin/uv); $$UV sync --frozen --group dev --group bench
	@touch $@

controlplane: .venv/.synced
	@$(PY) -m kubeloop envtest assets >/dev/null

## test: lint, type-check and the whole suite against the real control plane
test: setup lint typecheck pytest

lint:
	$(PY) -m ruff check src tests examples bench
	$(PY) -m ruff format --check src tests examples bench

typecheck:
	$(PY) -m mypy

pytest:
	$(PY) -m pytest -q

## demo: the main job (the NodePool + Autoscaler operator on a local control plane)
demo: setup
	$(PY) -m nodepool_operator demo --report demo-report

## bench: the full benchmark set (not part of make test); updates docs/benchmarks.md
bench: setup
	$(PY) bench/run.py --write

## faults: the full fault matrix (>= 100 scenarios, not part of make test); ends with one
## JSON line of counters, and writes one line per scenario to reports/faults/last.jsonl
faults: setup
	$(PY) -m tests.faults.runner --jsonl reports/faults/last.jsonl

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache .envtest
manifests: .venv/.synced
	$(PY) -m nodepool_operator.manifests

# kubeloop: `make demo` (the main job) and `make test` do all set-up on a fresh machine.
SHELL := /bin/bash
export UV_PYTHON_DOWNLOADS := never
UV := $(shell command -v uv 2>/dev/null || echo $(HOME)/.local/bin/uv)
PY := .venv/bin/python

.PHONY: setup controlplane monitoring certmanager nodeadm helm chart test test-release test-bench lint typecheck pytest docs demo manifests bench faults clean dist \
	docker-build image install uninstall deploy undeploy

## setup: the venv with dev dependencies, and the control-plane binaries (built once, cached)
setup: .venv/.synced controlplane monitoring certmanager nodeadm

$(UV):
	@command -v uv >/dev/null 2>&1 || python3 -m pip install --quiet --user uv || python3 -m pip install --quiet uv

# Installed compiled, as pip does: every process the tests start (pytest, the operator, its
# subprocesses) would otherwise compile matplotlib, numpy, moto ... from source on each import
# when bytecode is not written (PYTHONDONTWRITEBYTECODE, a read-only tree).
.venv/.synced: pyproject.toml packages/nodepool-operator/pyproject.toml uv.lock | $(UV)
	@UV=$$(command -v uv || echo $(HOME)/.local/bin/uv); $$UV sync --frozen --all-packages --group dev --group bench --group docs --compile-bytecode
	@touch $@

controlplane: .venv/.synced
	@$(PY) -m kubeloop envtest assets >/dev/null

## monitoring: promtool and the Prometheus Operator CRDs for the deploy test (built once, cached)
monitoring:
	@bash tools/monitoring/build.sh >/dev/null

## certmanager: cert-manager's Certificate and Issuer CRDs, from its Go module (fetched once,
## cached), so the deploy and chart tests dry-run the webhook's certificate against their schema
certmanager:
	@bash tools/certmanager/build.sh >/dev/null

## nodeadm: the AL2023 node bootstrapper whose offline config check judges every user data the
## tests generate (built once from the Go module proxy, cached)
nodeadm:
	@bash tools/nodeadm/build.sh >/dev/null

## helm: helm for the chart tests and `make chart` (built once from the Go module proxy, cached)
helm:
	@bash tools/helm/build.sh >/dev/null

## test: lint, type-check and the whole suite against the real control plane, except the tests
## of the shipped image and Helm chart (marker `release`), which need two more builds
test: setup lint typecheck docs pytest

## test-release: helm and the image (built once, cached; about 5 minutes cold), then the tests
## marked `release` (tests/e2e/test_image.py, tests/integration/test_chart.py). CI runs it after
## `make test` (.ci/run); kept apart so a cold `make test` stays within its time budget.
test-release: setup helm image
	$(PY) -m pytest -q --durations=10 -m release

## test-bench: the tests marked `bench`: each benchmark's harness at quick size (about 8 minutes;
## the Karpenter one builds Karpenter's kwok provider on first use, about 5 minutes cold, cached).
## CI runs it after `make test` (.ci/run), for the same budget reason.
test-bench: setup
	$(PY) -m pytest -q --durations=10 -m bench

LINTED := src packages tests examples bench tools

## lint: ruff, and the import contracts of .importlinter (the operator's layers; the product
## free of its demo and test bed; no _private module imported from outside its package)
lint:
	$(PY) -m ruff check $(LINTED)
	$(PY) -m ruff format --check $(LINTED)
	.venv/bin/lint-imports --no-logo --no-cache

typecheck:
	$(PY) -m mypy

## PYTEST_WORKERS: pytest-xdist workers, each with its own control plane; a file stays on one
## worker (--dist loadfile) so its module fixtures are built once. 0 (the default) runs everything
## in one process: on 2 cores two test beds starve the fault tests' leader pairs (see the note).
PYTEST_WORKERS ?= 0

## PYTEST_MARK: which tests `make pytest` runs (the release and bench tests have targets of their own)
PYTEST_MARK ?= not release and not bench

pytest:
	$(PY) -m pytest -q --durations=25 -m "$(PYTEST_MARK)" $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadfile)

## docs: the site with the API reference generated from the docstrings (--strict: a broken
## reference or snippet fails the build)
docs: .venv/.synced
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet -d site

## demo: the main job (the NodePool + Autoscaler operator on a local control plane). It needs
## the venv and the cluster binaries (kube-controller-manager and kwok too), not promtool.
demo: .venv/.synced controlplane
	$(PY) -m nodepool_operator demo --report demo-report

## bench: the full benchmark set (not part of make test); updates docs/benchmarks.md
bench: setup
	$(PY) bench/run.py --write

## dist: the two wheels and sdists (kubeloop, nodepool-operator) into dist/
dist: .venv/.synced
	@UV=$$(command -v uv || echo $(HOME)/.local/bin/uv); $$UV build --all-packages -o dist

## faults: the full fault matrix (>= 100 scenarios, not part of make test); ends with one
## JSON line of counters, and writes one line per scenario to reports/faults/last.jsonl
faults: setup
	$(PY) -m tests.faults.runner --jsonl reports/faults/last.jsonl

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache .envtest site dist
## manifests: the CRDs from the Python types, into config/crd and the chart's crds/ alike
manifests: .venv/.synced
	$(PY) -m nodepool_operator.manifests

## chart: lint the Helm chart (strict) and package it into dist/
chart: helm
	@HELM=$$(bash tools/helm/build.sh)/helm; $$HELM lint --strict charts/nodepool-operator \
		&& $$HELM package charts/nodepool-operator -d dist

## -- deploying to a cluster (Kubebuilder's targets) -------------------------------------------
## IMG: the operator image; KUBECTL: the kubectl built with the control plane unless given.
IMG ?= nodepool-operator:dev
KUBECTL ?= $(shell $(PY) -m kubeloop envtest assets 2>/dev/null)/kubectl
DEPLOY_DIR := .deploy

## docker-build: the operator image (needs a Docker engine)
docker-build:
	docker build -t $(IMG) .

## image: the same image without Docker: buildah builds the Dockerfile on a Debian bookworm
## python3 base made by mmdebstrap (no registry needed); base, layers and image are cached
## under ~/.cache/kubeloop (tools/image/build.sh; installs buildah, podman, runc, mmdebstrap
## from Debian's packages if missing)
image:
	@bash tools/image/build.sh $(IMG) >/dev/null

## install / uninstall: the CRDs into the cluster of $KUBECONFIG (the operator never installs them)
install: .venv/.synced
	$(KUBECTL) kustomize config/crd | $(KUBECTL) apply --server-side -f -
uninstall: .venv/.synced
	$(KUBECTL) kustomize config/crd | $(KUBECTL) delete --ignore-not-found -f -

## deploy / undeploy: config/default (CRDs, RBAC, Deployment, metrics Service, ServiceMonitor,
## PrometheusRule, PDB, NetworkPolicy, the validating webhook with its Service and cert-manager
## Issuer and Certificate; cert-manager must be installed) with the image set to $(IMG)
deploy: .venv/.synced
	@mkdir -p $(DEPLOY_DIR)
	@printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../config/default]\nimages:\n  - name: nodepool-operator\n    newName: %s\n    newTag: "%s"\n' \
		"$(firstword $(subst :, ,$(IMG)))" "$(or $(word 2,$(subst :, ,$(IMG))),latest)" > $(DEPLOY_DIR)/kustomization.yaml
	$(KUBECTL) kustomize $(DEPLOY_DIR) | $(KUBECTL) apply --server-side -f -
undeploy: .venv/.synced
	$(KUBECTL) kustomize config/default | $(KUBECTL) delete --ignore-not-found -f -

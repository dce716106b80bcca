# syntax=docker/dockerfile:1
# The NodePool operator's image: `make docker-build IMG=...`.
# Two stages: uv resolves the locked dependencies into a venv, and only that venv is copied
# into the runtime image (no compiler, no uv, no source tree). The runtime runs as a non-root
# user and needs nothing writable but /tmp (the Deployment mounts the root filesystem read-only).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG UV_VERSION=0.13.9
# uv goes into a venv of its own: a distribution's python3 (Debian's, used by `make image`)
# has no pip and refuses installs into the system (PEP 668); the official image accepts both.
RUN python3 -m venv /opt/uv \
 && /opt/uv/bin/python -m pip install --no-cache-dir --disable-pip-version-check "uv==${UV_VERSION}" \
 && ln -s /opt/uv/bin/uv /usr/local/bin/uv
ENV UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# Dependencies first, in their own layer: a source change does not reinstall them.
COPY pyproject.toml uv.lock README.md LICENSE ./
COPY packages/nodepool-operator/pyproject.toml packages/nodepool-operator/README.md \
     packages/nodepool-operator/LICENSE ./packages/nodepool-operator/
RUN uv sync --frozen --no-dev --package nodepool-operator --no-install-workspace
COPY src ./src
COPY tools/controlplane ./tools/controlplane
COPY packages/nodepool-operator/src ./packages/nodepool-operator/src
# the operator and kubeloop, as wheels (not editable), without the [demo] extra
RUN uv sync --frozen --no-dev --package nodepool-operator --no-editable

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="nodepool-operator" \
      org.opencontainers.image.description="The NodePool + Autoscaler operator, on kubeloop" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# 65532: the conventional "nonroot" uid of distroless images, as the Deployment expects.
USER 65532:65532
ENTRYPOINT ["nodepool-operator"]
# EC2 by default: the simulated cloud is a test bed the image does not carry.
CMD ["run", "--leader-elect", "--cloud=aws"]

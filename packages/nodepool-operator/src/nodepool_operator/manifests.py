"""Write the operator's CRDs as YAML, one file per CRD, generated from ``nodepool_operator.api``.

    python -m nodepool_operator.manifests [--check] [--out DIR ...]

The same files go to every ``--out`` directory: by default ``config/crd`` (kustomize, ``make
install``) and the Helm chart's ``charts/nodepool-operator/crds``, so the two cannot drift.
Without ``--out`` it also writes the CRDs of an install with the webhook, to
``config/conversion`` (which config/default deploys) and the chart's ``files/crds`` (which its
``crds.conversion`` value renders as templates): the NodePool, Autoscaler and Instance CRDs
serving ``v1beta1`` too, converted by the operator's webhook behind config/webhook's Service,
its CA injected by cert-manager, and the AwsNodeClass CRD as config/crd has it, so that each
directory is a whole set (docs/versions.md).
``--check`` writes nothing: it prints a unified diff and exits 1 when the files in any ``--out``
differ from what the types generate (stale, hand-edited, missing or left over).
``kubeloop manifests`` does the same for any module; this command adds the operator's two
default directories and its header.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from kubeloop import crd
from nodepool_operator.api import (
    AUTOSCALER_CONVERSION_PATH,
    CUSTOM_RESOURCES,
    INSTANCE_CONVERSION_PATH,
    NODEPOOL_CONVERSION_PATH,
    autoscaler_served_as_v1beta1,
    instance_served_as_v1beta1,
    nodepool_served_as_v1beta1,
)

DEFAULT_OUTS = (Path("config/crd"), Path("charts/nodepool-operator/crds"))
CONVERSION_OUT = Path("config/conversion")
#: The same files for the chart, whose template sets the release's Service and Certificate.
CHART_CONVERSION_OUT = Path("charts/nodepool-operator/files/crds")
#: config/webhook's Service (the apiserver calls every webhook of the operator through it).
WEBHOOK_SERVICE: Final = {"namespace": "nodepool-system", "name": "nodepool-operator-webhook"}
#: config/certmanager's Certificate, whose CA cert-manager's CA injector puts in caBundle.
SERVING_CERT: Final = "nodepool-system/nodepool-operator-serving-cert"
HEADER = (
    "# Generated from the Python types in nodepool_operator/api (packages/nodepool-operator)\n"
    "# by `make manifests`.\n"
    "# Do not edit: change the types and regenerate.\n"
)


filename = crd.filename


def render() -> dict[str, str]:
    """File name → YAML text of every CRD."""
    return crd.render(CUSTOM_RESOURCES, HEADER)


def conversion_crds() -> list[dict[str, Any]]:
    """The NodePool, Autoscaler and Instance CRDs serving v1alpha1 (stored) and v1beta1,
    converted by the operator's webhook behind config/webhook's Service, with cert-manager's
    CA injection annotation."""
    out = []
    for served, path in (
        (nodepool_served_as_v1beta1, NODEPOOL_CONVERSION_PATH),
        (autoscaler_served_as_v1beta1, AUTOSCALER_CONVERSION_PATH),
        (instance_served_as_v1beta1, INSTANCE_CONVERSION_PATH),
    ):
        service = {**WEBHOOK_SERVICE, "path": path, "port": 443}
        definition = served({"service": service}).definition()
        definition["metadata"]["annotations"] = {"cert-manager.io/inject-ca-from": SERVING_CERT}
        out.append(definition)
    return out


def webhook_install_crds() -> list[dict[str, Any]]:
    """Every CRD of an install that runs the webhook: the three converted ones, and the
    AwsNodeClass, which has one version."""
    converted = {c["metadata"]["name"] for c in conversion_crds()}
    plain = [c.definition() for c in CUSTOM_RESOURCES if c.name not in converted]
    return [*conversion_crds(), *plain]


def render_conversion() -> dict[str, str]:
    """File name → YAML text of config/conversion's CRDs (and the chart's files/crds)."""
    return crd.render(webhook_install_crds(), HEADER)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nodepool_operator.manifests")
    parser.add_argument("--check", action="store_true", help="diff instead of writing")
    parser.add_argument(
        "--out",
        type=Path,
        action="append",
        help="a directory to write the CRDs to; repeatable (default: "
        + ", ".join(map(str, DEFAULT_OUTS))
        + ")",
    )
    args = parser.parse_args(argv)
    outs: list[Path] = args.out or list(DEFAULT_OUTS)
    stale = crd.write_manifests(CUSTOM_RESOURCES, outs, header=HEADER, check=args.check)
    if not args.out:
        stale += crd.write_manifests(
            webhook_install_crds(),
            [CONVERSION_OUT, CHART_CONVERSION_OUT],
            header=HEADER,
            check=args.check,
        )
    if args.check and stale:
        print(f"{stale} CRD file(s) out of date; run `make manifests`", file=sys.stderr)
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    raise SystemExit(main())

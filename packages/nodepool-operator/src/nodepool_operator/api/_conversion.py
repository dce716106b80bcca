"""Converting NodePools, Autoscalers and Instances between ``v1alpha1`` (the hub: what the
controllers read) and ``v1beta1`` (a spoke, and the storage version where both are served),
served by the operator's conversion webhook.

Every spec field maps one to one (``NODEPOOL_FIELDS``, ``AUTOSCALER_FIELDS``,
``INSTANCE_FIELDS``: a v1beta1 path and the v1alpha1 field holding its value), so no value is
lost either way. A field the map does not know (one a later version adds before this converter
learns it) is not dropped either: as Kubebuilder's converters do, it travels in an annotation of
the other version (``BETA_FIELDS`` / ``ALPHA_FIELDS``, JSON) and is put back when the object is
converted back, so a round trip through either version returns the object it started with.
"""

from __future__ import annotations

import json
from typing import Any, Final

from kubeloop import Object
from kubeloop.webhook import ConversionError, Converter

#: The hub: the version the controllers read (and config/crd's only one). The hub is the
#: code's choice, storage the CRD's: with two versions every conversion is one step either
#: way, so the two-version CRDs store v1beta1 without the hub moving.
HUB: Final = "v1alpha1"
BETA: Final = "v1beta1"
#: Where the operator's webhook server serves the conversion (Kubebuilder's /convert, one
#: path per kind here, as each kind has its own converter).
NODEPOOL_CONVERSION_PATH: Final = "/convert-kubeloop-dev-nodepool"
AUTOSCALER_CONVERSION_PATH: Final = "/convert-kubeloop-dev-autoscaler"
INSTANCE_CONVERSION_PATH: Final = "/convert-kubeloop-dev-instance"
#: Where v1beta1 spec fields that v1alpha1 cannot hold wait while the object is v1alpha1.
BETA_FIELDS: Final = "conversion.kubeloop.dev/v1beta1-spec"
#: Where v1alpha1 spec fields that v1beta1 cannot hold wait while the object is v1beta1.
ALPHA_FIELDS: Final = "conversion.kubeloop.dev/v1alpha1-spec"

#: Each v1beta1 spec field (as a path) and the v1alpha1 spec field that holds its value.
FieldMap = tuple[tuple[tuple[str, ...], str], ...]

NODEPOOL_FIELDS: Final[FieldMap] = (
    (("size", "target"), "targetNodes"),
    (("size", "zoneTargets"), "zoneTargets"),
    (("size", "min"), "minNodes"),
    (("size", "max"), "maxNodes"),
    (("template", "metadata", "labels"), "labels"),
    (("template", "spec", "instanceType"), "instanceType"),
    (("template", "spec", "instanceTypes"), "instanceTypes"),
    (("template", "spec", "capacityType"), "capacityType"),
    (("template", "spec", "capacity", "cpu"), "cpu"),
    (("template", "spec", "capacity", "memory"), "memory"),
    (("template", "spec", "capacity", "disk"), "diskSize"),
    (("template", "spec", "taints"), "taints"),
    (("template", "spec", "nodeClassRef"), "nodeClassRef"),
    (("reserveNewNodes",), "reserveNewNodes"),
    (("disruption",), "disruption"),
)
AUTOSCALER_FIELDS: Final[FieldMap] = (
    (("nodePoolRef",), "nodePoolRef"),
    (("namespaces",), "namespaces"),
    (("frequency",), "frequency"),
    (("maxNodes",), "maxNodes"),
    (("weight",), "weight"),
    (("scaleDown", "enabled"), "scaleDownEnabled"),
    (("scaleDown", "unneededTime"), "scaleDownUnneededTime"),
    (("scaleDown", "consolidation"), "scaleDownConsolidation"),
)
INSTANCE_FIELDS: Final[FieldMap] = (
    (("imageId",), "image"),
    (("instanceType",), "instanceType"),
    (("nodeClassRef",), "nodeClassRef"),
)


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConversionError(f"{where} must be an object, got {type(value).__name__}")
    return value


def _pop_path(spec: dict[str, Any], path: tuple[str, ...]) -> tuple[bool, Any]:
    """(found, value) of ``path`` in ``spec``, removed from it."""
    here = spec
    for i, key in enumerate(path[:-1]):
        if key not in here:
            return False, None
        here = _object(here[key], "spec." + ".".join(path[: i + 1]))
    if path[-1] not in here:
        return False, None
    return True, here.pop(path[-1])


def _set_path(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    here = spec
    for key in path[:-1]:
        here = here.setdefault(key, {})
    here[path[-1]] = value


def _prune(tree: dict[str, Any]) -> dict[str, Any]:
    """``tree`` without the objects emptied by moving their fields out."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            value = _prune(value)
            if not value:
                continue
        out[key] = value
    return out


def _merge(into: dict[str, Any], extra: dict[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into.setdefault(key, value)


def _stash(obj: Object, key: str, leftover: dict[str, Any]) -> None:
    if leftover:
        annotations = obj.setdefault("metadata", {}).setdefault("annotations", {})
        annotations[key] = json.dumps(leftover, sort_keys=True, separators=(",", ":"))


def _unstash(obj: Object, key: str) -> dict[str, Any]:
    """The fields stashed under ``key``, the annotation removed; an annotation that is not a
    JSON object (someone else wrote it) stays as it is and yields nothing.

    Not an error: a stored object whose conversion fails cannot be read in the other version
    at all, and the controllers read v1alpha1 while v1beta1 is stored, so one such
    annotation would stop every list and watch of the kind (the Kubernetes docs ask that
    conversion not be used to validate)."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if key not in annotations:
        return {}
    try:
        value = json.loads(annotations[key])
    except (TypeError, ValueError):
        return {}
    if not isinstance(value, dict):
        return {}
    del annotations[key]
    if not annotations:
        del meta["annotations"]
    return value


def beta_to_alpha(obj: Object, fields: FieldMap) -> None:
    """A v1beta1 object as v1alpha1 (in place), its spec moved by ``fields``."""
    if "spec" not in obj:
        return
    spec = _object(obj["spec"], "spec")
    alpha: dict[str, Any] = {}
    for path, name in fields:
        found, value = _pop_path(spec, path)
        if found:
            alpha[name] = value
    _merge(alpha, _unstash(obj, ALPHA_FIELDS))
    _stash(obj, BETA_FIELDS, _prune(spec))
    obj["spec"] = alpha


def alpha_to_beta(obj: Object, fields: FieldMap) -> None:
    """A v1alpha1 object as v1beta1 (in place), its spec moved by ``fields``."""
    if "spec" not in obj:
        return
    spec = _object(obj["spec"], "spec")
    beta: dict[str, Any] = {}
    for path, name in fields:
        if name in spec:
            _set_path(beta, path, spec.pop(name))
    _merge(beta, _unstash(obj, BETA_FIELDS))
    _stash(obj, ALPHA_FIELDS, spec)
    obj["spec"] = beta


def field_map_converter(fields: FieldMap) -> Converter:
    """A converter moving spec fields by ``fields``: v1alpha1 the hub, v1beta1 both ways."""
    converter = Converter(hub=HUB)
    converter.to_hub(BETA)(lambda obj: beta_to_alpha(obj, fields))
    converter.from_hub(BETA)(lambda obj: alpha_to_beta(obj, fields))
    return converter


def nodepool_converter() -> Converter:
    """The NodePool's converter: v1alpha1 the hub, v1beta1 both ways."""
    return field_map_converter(NODEPOOL_FIELDS)


def autoscaler_converter() -> Converter:
    """The Autoscaler's converter: v1alpha1 the hub, v1beta1 both ways."""
    return field_map_converter(AUTOSCALER_FIELDS)


def instance_converter() -> Converter:
    """The Instance's converter: v1alpha1 the hub, v1beta1 both ways."""
    return field_map_converter(INSTANCE_FIELDS)

"""ConversionReview v1 with a hub-and-spoke model.

One version of a CRD is the hub; every other version (a spoke) has one function to the
hub and one from it. Any version then converts to any other through the hub, so N
versions need 2(N-1) functions instead of N(N-1), as in controller-runtime's
``conversion.Hub`` / ``Convertible``.

Converters get a deep copy of the object and return the converted one (or change the
copy in place and return None); kubeloop sets ``apiVersion``. The apiserver refuses a
conversion that changes metadata other than labels and annotations, so a field a
version cannot hold travels in an annotation (see the docs' lossless round trip).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from typing import Any

from kubeloop._errors import KubeloopError
from kubeloop._resource import Object

log = logging.getLogger("kubeloop.webhook")

CONVERSION_API_VERSION = "apiextensions.k8s.io/v1"

#: Converts one object: gets a deep copy, returns the result (or None: the changed copy).
ConvertFunc = Callable[[Object], Object | None]


class ConversionError(KubeloopError):
    """An object cannot be converted (unknown version, converter error)."""


class MalformedConversionReview(ValueError):
    """The request body is not a v1 ConversionReview (the server replies 400)."""


def _split(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class Converter:
    """Converts the versions of one CRD through its hub version.

    ::

        widgets = Converter(hub="v1beta1")

        @widgets.to_hub("v1alpha1")
        def alpha_to_beta(obj):
            obj["spec"]["replicas"] = obj["spec"].pop("size")

        @widgets.from_hub("v1alpha1")
        def beta_to_alpha(obj):
            obj["spec"]["size"] = obj["spec"].pop("replicas")

    Args:
        hub: the hub version's name (``v1beta1``), usually the storage version.
    """

    def __init__(self, hub: str) -> None:
        if not hub or "/" in hub:
            raise ValueError(f"Converter: hub must be a version name such as v1, got {hub!r}")
        self.hub = hub
        self._to_hub: dict[str, ConvertFunc] = {}
        self._from_hub: dict[str, ConvertFunc] = {}

    def to_hub(self, version: str) -> Callable[[ConvertFunc], ConvertFunc]:
        """Register the function converting ``version`` to the hub (a decorator)."""
        return self._register(self._to_hub, version, "to_hub")

    def from_hub(self, version: str) -> Callable[[ConvertFunc], ConvertFunc]:
        """Register the function converting the hub to ``version`` (a decorator)."""
        return self._register(self._from_hub, version, "from_hub")

    def _register(
        self, table: dict[str, ConvertFunc], version: str, what: str
    ) -> Callable[[ConvertFunc], ConvertFunc]:
        if version == self.hub:
            raise ValueError(f"Converter.{what}({version!r}): that is the hub version itself")
        if version in table:
            raise ValueError(f"Converter.{what}({version!r}) is already registered")

        def register(fn: ConvertFunc) -> ConvertFunc:
            table[version] = fn
            return fn

        return register

    @property
    def versions(self) -> list[str]:
        """The hub, then every spoke that converts both ways."""
        return [self.hub, *sorted(v for v in self._to_hub if v in self._from_hub)]

    def convert(self, obj: Object, desired_api_version: str) -> Object:
        """``obj`` as ``desired_api_version`` (``group/version``); a new object."""
        source = obj.get("apiVersion")
        if not isinstance(source, str) or "/" not in source:
            raise ConversionError(f"object has no group/version apiVersion: {source!r}")
        group, have = _split(source)
        want_group, want = _split(desired_api_version)
        if group != want_group:
            raise ConversionError(
                f"cannot convert {source} to another group's {desired_api_version}"
            )
        if have == want:
            return obj
        hub = obj if have == self.hub else self._step(self._to_hub, have, "to", obj)
        hub["apiVersion"] = f"{group}/{self.hub}"
        out = hub if want == self.hub else self._step(self._from_hub, want, "from", hub)
        out["apiVersion"] = desired_api_version
        return out

    def _step(self, table: dict[str, ConvertFunc], version: str, way: str, obj: Object) -> Object:
        fn = table.get(version)
        if fn is None:
            raise ConversionError(
                f"no conversion {way} hub {self.hub} for version {version} "
                f"(known: {', '.join(self.versions)})"
            )
        work = copy.deepcopy(obj)
        result = fn(work)
        result = work if result is None else result
        if not isinstance(result, dict):
            raise ConversionError(
                f"the converter {way} hub for {version} returned {type(result).__name__}, "
                "not an object"
            )
        return result


def conversion_response(uid: str, converted: list[Object] | None, error: str | None) -> Object:
    response: dict[str, Any] = {"uid": uid, "convertedObjects": converted or []}
    response["result"] = {"status": "Failure", "message": error} if error else {"status": "Success"}
    return {"apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview", "response": response}


def parse_conversion_review(body: Any) -> tuple[str, str, list[Object]]:
    """(uid, desiredAPIVersion, objects) of a v1 ConversionReview."""
    if not isinstance(body, dict) or body.get("kind") != "ConversionReview":
        raise MalformedConversionReview("expected a ConversionReview object")
    if body.get("apiVersion") != CONVERSION_API_VERSION:
        raise MalformedConversionReview(
            f"expected apiVersion {CONVERSION_API_VERSION}, got {body.get('apiVersion')!r} "
            "(set conversionReviewVersions: [v1] in the CRD)"
        )
    req = body.get("request")
    if not isinstance(req, dict):
        raise MalformedConversionReview("ConversionReview.request is missing")
    uid, desired, objects = req.get("uid"), req.get("desiredAPIVersion"), req.get("objects")
    if not isinstance(uid, str) or not uid:
        raise MalformedConversionReview("ConversionReview.request.uid is missing")
    if not isinstance(desired, str) or "/" not in desired:
        raise MalformedConversionReview(
            f"ConversionReview.request.desiredAPIVersion is invalid: {desired!r}"
        )
    if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
        raise MalformedConversionReview(
            "ConversionReview.request.objects must be a list of objects"
        )
    return uid, desired, objects


def review_conversion(
    webhook: str, converter: Converter, uid: str, desired: str, objects: list[Object]
) -> Object:
    """Convert every object of a review; a failure fails the whole review with a message
    naming the object, as the apiserver takes all or nothing."""
    converted: list[Object] = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        name = f"{obj.get('kind', '?')} {meta.get('namespace', '')}/{meta.get('name', '')}"
        try:
            converted.append(converter.convert(obj, desired))
        except Exception as err:
            # a ConversionError is the object's fault (its message says what): no traceback;
            # anything else is a converter's bug, logged with one
            log.log(
                logging.WARNING if isinstance(err, ConversionError) else logging.ERROR,
                "webhook %s: converting %s to %s failed: %s",
                webhook,
                name,
                desired,
                err,
                exc_info=not isinstance(err, ConversionError),
                extra={"webhook": webhook, "uid": uid},
            )
            why = err if isinstance(err, ConversionError) else f"{type(err).__name__}: {err}"
            return conversion_response(uid, None, f"converting {name} to {desired}: {why}")
    return conversion_response(uid, converted, None)

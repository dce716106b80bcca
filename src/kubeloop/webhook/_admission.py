"""AdmissionReview v1: what a validating or mutating handler sees, and what it answers.

A handler gets an :class:`AdmissionRequest` (operation, object, old object, user,
``dryRun``) and returns an :class:`Admission` (or ``None`` to allow). A mutating handler
also gets a deep copy of the object to change in place; kubeloop computes the RFC 6902
JSON patch the apiserver applies, so handlers never write patches by hand.

A handler that raises is answered with a denial that names the webhook and the error
(``allowed: false``, code 403), never an HTTP 500: the apiserver would turn a 500 into
``failed calling webhook`` (or let the object through under ``failurePolicy: Ignore``),
and a client retrying a 5xx would loop on a bug that no retry fixes.
"""

from __future__ import annotations

import base64
import copy
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from kubeloop._errors import STATUS_REASONS, Cause
from kubeloop._resource import Object

log = logging.getLogger("kubeloop.webhook")

ADMISSION_API_VERSION = "admission.k8s.io/v1"


class MalformedReview(ValueError):
    """The request body is not a review kubeloop can answer (the server replies 400)."""


@dataclass(frozen=True)
class UserInfo:
    """Who sent the request, as the apiserver authenticated them."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class AdmissionRequest:
    """One admission request (``AdmissionReview.request``).

    ``object`` is None on DELETE (the object being deleted is ``old_object``);
    ``old_object`` is set on UPDATE and DELETE only. ``dry_run`` is True when nothing
    will be persisted: a handler with side effects must skip them then (and the webhook
    configuration should say ``sideEffects: NoneOnDryRun``).
    """

    uid: str
    operation: str
    kind: Mapping[str, str]
    resource: Mapping[str, str]
    name: str
    namespace: str | None
    object: Object | None
    old_object: Object | None
    user: UserInfo
    dry_run: bool = False
    sub_resource: str | None = None
    options: Object | None = None
    #: the whole ``request`` as sent, for fields not surfaced above
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Admission:
    """A handler's answer. Build it with :meth:`allow` or :meth:`deny`."""

    allowed: bool
    message: str = ""
    code: int = 200
    causes: tuple[Cause, ...] = ()
    warnings: tuple[str, ...] = ()

    @classmethod
    def allow(cls, *warnings: str) -> Admission:
        """Admit the request; ``warnings`` reach the client (kubectl prints them)."""
        return cls(True, warnings=warnings)

    @classmethod
    def deny(
        cls,
        message: str,
        *causes: Cause,
        code: int = 403,
        warnings: tuple[str, ...] = (),
    ) -> Admission:
        """Refuse the request. The client sees ``admission webhook "<name>" denied the
        request: <message>``, and ``causes`` (field paths) in the Status details. With
        ``code=422`` clients raise :class:`~kubeloop.Invalid`, and kubectl prints only the
        causes, so they must then say everything."""
        if not message:
            raise ValueError("Admission.deny needs a message: the client shows nothing else")
        if not 400 <= code < 600:
            raise ValueError(f"Admission.deny: code {code} is not an HTTP error code")
        return cls(False, message, code, causes, warnings)


#: A validating handler: ``None`` allows. May be a plain function or a coroutine function.
Validator = Callable[[AdmissionRequest], Awaitable[Admission | None] | Admission | None]
#: A mutating handler: changes ``obj`` (a deep copy of the request's object) in place.
Mutator = Callable[[AdmissionRequest, Object], Awaitable[Admission | None] | Admission | None]


def _str_map(value: Any, where: str) -> Mapping[str, str]:
    if not isinstance(value, dict):
        raise MalformedReview(f"{where} must be an object, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items()}


def _object(value: Any, where: str) -> Object | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise MalformedReview(f"{where} must be an object or null, got {type(value).__name__}")
    return value


def parse_admission_review(body: Any) -> AdmissionRequest:
    """The request of an ``admission.k8s.io/v1`` AdmissionReview; :class:`MalformedReview`
    (naming the field) for anything else."""
    if not isinstance(body, dict):
        raise MalformedReview("an AdmissionReview must be a JSON object")
    if body.get("apiVersion") != ADMISSION_API_VERSION or body.get("kind") != "AdmissionReview":
        raise MalformedReview(
            f"expected apiVersion {ADMISSION_API_VERSION} kind AdmissionReview, got "
            f"apiVersion {body.get('apiVersion')!r} kind {body.get('kind')!r} "
            "(set admissionReviewVersions: [v1] in the webhook configuration)"
        )
    req = body.get("request")
    if not isinstance(req, dict):
        raise MalformedReview("AdmissionReview.request is missing")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise MalformedReview("AdmissionReview.request.uid is missing")
    operation = req.get("operation")
    if operation not in ("CREATE", "UPDATE", "DELETE", "CONNECT"):
        raise MalformedReview(f"AdmissionReview.request.operation {operation!r} is not known")
    user = req.get("userInfo") or {}
    if not isinstance(user, dict):
        raise MalformedReview("AdmissionReview.request.userInfo must be an object")
    return AdmissionRequest(
        uid=uid,
        operation=operation,
        kind=_str_map(req.get("kind") or {}, "request.kind"),
        resource=_str_map(req.get("resource") or {}, "request.resource"),
        name=str(req.get("name") or ""),
        namespace=req.get("namespace") or None,
        object=_object(req.get("object"), "request.object"),
        old_object=_object(req.get("oldObject"), "request.oldObject"),
        user=UserInfo(
            username=str(user.get("username") or ""),
            uid=str(user.get("uid") or ""),
            groups=tuple(user.get("groups") or ()),
            extra={k: tuple(v) for k, v in (user.get("extra") or {}).items()},
        ),
        dry_run=bool(req.get("dryRun")),
        sub_resource=req.get("subResource") or None,
        options=_object(req.get("options"), "request.options"),
        raw=req,
    )


def _status(answer: Admission) -> dict[str, Any]:
    status: dict[str, Any] = {
        "status": "Failure",
        "code": answer.code,
        "reason": STATUS_REASONS.get(
            answer.code, "Forbidden" if answer.code < 500 else "InternalError"
        ),
        "message": answer.message,
    }
    if answer.causes:
        status["details"] = {
            "causes": [
                {"reason": c.reason, "message": c.message, "field": c.field} for c in answer.causes
            ]
        }
    return status


def admission_response(
    uid: str, answer: Admission, patch: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The AdmissionReview the apiserver expects back."""
    response: dict[str, Any] = {"uid": uid, "allowed": answer.allowed}
    if not answer.allowed:
        response["status"] = _status(answer)
    if answer.warnings:
        response["warnings"] = list(answer.warnings)
    if patch and answer.allowed:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


def json_patch(before: Object, after: Object) -> list[dict[str, Any]]:
    """The RFC 6902 operations that turn ``before`` into ``after``."""
    ops: list[dict[str, Any]] = jsonpatch.make_patch(before, after).patch
    return ops


async def _call(fn: Callable[..., Any], *args: Any) -> Admission | None:
    result = fn(*args)
    if inspect.isawaitable(result):
        result = await result
    if result is not None and not isinstance(result, Admission):
        raise TypeError(
            f"a webhook handler must return an Admission or None, got {type(result).__name__}"
        )
    return result


def _describe(req: AdmissionRequest) -> str:
    where = f"{req.namespace}/{req.name}" if req.namespace else req.name
    return f"{req.operation} {req.resource.get('resource', '?')} {where or '(unnamed)'}"


async def review_admission(
    webhook: str,
    req: AdmissionRequest,
    validator: Validator | None = None,
    mutator: Mutator | None = None,
) -> dict[str, Any]:
    """Run one handler on ``req`` and build the AdmissionReview response; never raises
    for a handler error (it becomes a denial naming ``webhook``)."""
    patch: list[dict[str, Any]] | None = None
    try:
        if mutator is not None:
            original = req.object if req.object is not None else {}
            mutated = copy.deepcopy(original)
            answer = await _call(mutator, req, mutated) or Admission.allow()
            # DELETE and CONNECT carry no object: there is nothing to patch
            if answer.allowed and req.object is not None:
                patch = json_patch(original, mutated)
        elif validator is not None:
            answer = await _call(validator, req) or Admission.allow()
        else:  # pragma: no cover - the server always passes one
            raise TypeError("review_admission needs a validator or a mutator")
    except Exception as err:
        log.exception(
            "webhook %s: handler failed on %s",
            webhook,
            _describe(req),
            extra={"webhook": webhook, "uid": req.uid},
        )
        answer = Admission.deny(f"webhook {webhook} failed: {type(err).__name__}: {err}")
    if not answer.allowed:
        log.info(
            "webhook %s denied %s: %s",
            webhook,
            _describe(req),
            answer.message,
            extra={"webhook": webhook, "uid": req.uid, "user": req.user.username},
        )
    return admission_response(req.uid, answer, patch)

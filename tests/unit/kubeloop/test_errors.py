"""classify(): only the reconciler or an invalid request gives up; everything else retries."""

from __future__ import annotations

import pytest

from kubeloop import (
    AlreadyExists,
    ApiError,
    BadRequest,
    Conflict,
    ErrorClass,
    Forbidden,
    Gone,
    Invalid,
    MethodNotAllowed,
    NotFound,
    RequestTimeout,
    ServerError,
    TerminalError,
    TooManyRequests,
    TransportError,
    Unauthorized,
    classify,
)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (Conflict(409, "Conflict", "stale"), ErrorClass.CONFLICT),
        (TooManyRequests(429, "TooManyRequests", ""), ErrorClass.BACKOFF),
        (ServerError(503, "ServiceUnavailable", ""), ErrorClass.BACKOFF),
        (TransportError("reset"), ErrorClass.BACKOFF),
        (RequestTimeout("slow"), ErrorClass.BACKOFF),
        (TimeoutError(), ErrorClass.BACKOFF),
        (KeyError("bug"), ErrorClass.BACKOFF),
        # the cluster is not (yet) in a state that admits the request: retried later
        (Unauthorized(401, "Unauthorized", ""), ErrorClass.REQUEUE),
        (Forbidden(403, "Forbidden", "RBAC not granted yet"), ErrorClass.REQUEUE),
        (NotFound(404, "NotFound", "the server could not find the resource"), ErrorClass.REQUEUE),
        (AlreadyExists(409, "AlreadyExists", "taken"), ErrorClass.REQUEUE),
        (Gone(410, "Expired", ""), ErrorClass.REQUEUE),
        (ApiError(418, "Teapot", ""), ErrorClass.REQUEUE),
        # the request itself is invalid, or the reconciler says so: retrying cannot help
        (BadRequest(400, "BadRequest", ""), ErrorClass.TERMINAL),
        (MethodNotAllowed(405, "MethodNotAllowed", ""), ErrorClass.TERMINAL),
        (Invalid(422, "Invalid", "spec.size: must be >= 0"), ErrorClass.TERMINAL),
        (TerminalError("cannot provision"), ErrorClass.TERMINAL),
    ],
)
def test_classify(error: BaseException, expected: ErrorClass) -> None:
    assert classify(error) is expected


def test_the_server_status_decides_the_class() -> None:
    status = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": "no"}
    assert classify(ApiError.from_status(403, status)) is ErrorClass.REQUEUE
    status = {"kind": "Status", "code": 422, "reason": "Invalid", "message": "bad"}
    assert classify(ApiError.from_status(422, status)) is ErrorClass.TERMINAL

"""How a failed conversion is logged: an object a converter refuses (ConversionError, the
object's fault) is one warning without a traceback; a converter's own bug keeps its
traceback. The review fails with the message either way."""

from __future__ import annotations

import logging

import pytest

from kubeloop import Object
from kubeloop.webhook import ConversionError, Converter
from kubeloop.webhook._conversion import review_conversion

WIDGETS = Converter(hub="v2")


@WIDGETS.to_hub("v1")
def _v1_to_v2(obj: Object) -> None:
    if obj["spec"].get("size") == "bad":
        raise ConversionError("spec.size: not a number")
    if obj["spec"].get("size") == "bug":
        raise KeyError("oops")


@WIDGETS.from_hub("v1")
def _v2_to_v1(obj: Object) -> None:
    return None


def _widget(size: str) -> Object:
    return {
        "apiVersion": "x.dev/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"size": size},
    }


@pytest.mark.parametrize(
    ("size", "level", "traceback", "message"),
    [
        ("bad", logging.WARNING, False, "spec.size: not a number"),
        ("bug", logging.ERROR, True, "KeyError: 'oops'"),
    ],
    ids=["the object's fault", "a converter's bug"],
)
def test_a_failed_conversion_is_logged_by_whose_fault_it_is(
    caplog: pytest.LogCaptureFixture, size: str, level: int, traceback: bool, message: str
) -> None:
    with caplog.at_level(logging.WARNING, logger="kubeloop.webhook"):
        review = review_conversion("/convert", WIDGETS, "u1", "x.dev/v2", [_widget(size)])
    result = review["response"]["result"]
    assert result["status"] == "Failure"
    assert result["message"] == f"converting Widget /w to x.dev/v2: {message}"
    (record,) = caplog.records
    assert (record.levelno, bool(record.exc_info)) == (level, traceback)
    assert record.getMessage().startswith(
        "webhook /convert: converting Widget /w to x.dev/v2 failed"
    )

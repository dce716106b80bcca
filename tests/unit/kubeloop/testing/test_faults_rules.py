"""The fault proxy's pure parts: request classification, rule matching, the log's queries."""

from __future__ import annotations

import json

import pytest

from kubeloop.testing._faultlog import FaultLog, LogEntry
from kubeloop.testing.faults import (
    CutWatch,
    Delay,
    Match,
    Respond,
    Rule,
    request_info,
    status_body,
    too_many_requests,
)


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/a/pods", {}, ("list", "pods", None, "a", None)),
        ("GET", "/api/v1/namespaces/a/pods/p", {}, ("get", "pods", None, "a", "p")),
        ("GET", "/api/v1/pods", {"watch": "true"}, ("watch", "pods", None, None, None)),
        ("GET", "/api/v1/namespaces/a/pods", {"watch": "1"}, ("watch", "pods", None, "a", None)),
        ("GET", "/api/v1/watch/namespaces/a/pods", {}, ("watch", "pods", None, "a", None)),
        ("GET", "/api/v1/pods", {"watch": "false"}, ("list", "pods", None, None, None)),
        ("POST", "/api/v1/namespaces/a/configmaps", {}, ("create", "configmaps", None, "a", None)),
        (
            "PUT",
            "/apis/kubeloop.dev/v1alpha1/namespaces/a/nodepools/np/status",
            {},
            ("update", "nodepools", "status", "a", "np"),
        ),
        ("PATCH", "/api/v1/nodes/n1", {}, ("patch", "nodes", None, None, "n1")),
        ("DELETE", "/api/v1/namespaces/a/pods/p", {}, ("delete", "pods", None, "a", "p")),
        ("DELETE", "/api/v1/namespaces/a/pods", {}, ("deletecollection", "pods", None, "a", None)),
        ("GET", "/api/v1/namespaces/a", {}, ("get", "namespaces", None, None, "a")),
        (
            "PUT",
            "/api/v1/namespaces/a/finalize",
            {},
            ("update", "namespaces", "finalize", None, "a"),
        ),
        ("POST", "/api/v1/namespaces", {}, ("create", "namespaces", None, None, None)),
        (
            "PUT",
            "/apis/apps/v1/namespaces/a/deployments/d/scale",
            {},
            ("update", "deployments", "scale", "a", "d"),
        ),
    ],
)
def test_request_info_reads_paths_like_the_apiserver(method, path, query, expected) -> None:
    info = request_info(method, path, query)
    assert (info.verb, info.resource, info.subresource, info.namespace, info.name) == expected


def test_request_info_groups_and_non_resource_paths() -> None:
    assert request_info("GET", "/apis/apps/v1/deployments", {}).group == "apps"
    assert request_info("GET", "/api/v1/pods", {}).group == ""
    version = request_info("GET", "/version", {})
    assert (version.verb, version.resource) == ("get", None)
    discovery = request_info("GET", "/apis/apps/v1", {})
    assert (discovery.verb, discovery.resource, discovery.group) == ("get", None, "apps")


def _rule(rule_id: int = 0, **kwargs) -> Rule:
    return Rule(id=rule_id, **kwargs)


def test_match_fields_and_sets() -> None:
    update_cm = request_info("PUT", "/api/v1/namespaces/a/configmaps/c", {})
    m = Match.of(verb={"update", "patch"}, resource="configmaps", namespace="a", client="op")
    assert m.matches(update_cm, "op", "ua")
    assert not m.matches(update_cm, "other", "ua")
    assert not Match.of(namespace="b").matches(update_cm, "op", "ua")
    assert not Match.of(verb="create").matches(update_cm, "op", "ua")
    assert Match.of(user_agent="kubeloop/").matches(update_cm, "x", "kubeloop/0.1 (python)")
    assert not Match.of(user_agent="kubectl").matches(update_cm, "x", "kubeloop/0.1 (python)")
    status = request_info("PUT", "/api/v1/namespaces/a/pods/p/status", {})
    assert Match.of(subresource="status").matches(status, "x", "")
    assert not Match.of(subresource="").matches(status, "x", "")
    assert Match.of(subresource="").matches(update_cm, "x", "")
    watch = request_info("GET", "/api/v1/pods", {"watch": "true"})
    assert Match.of(watch=True).matches(watch, "x", "")
    assert not Match.of(watch=False).matches(watch, "x", "")
    # namespace "" matches only requests outside any namespace (a cluster-wide watch)
    assert Match.of(namespace="").matches(watch, "x", "")
    assert not Match.of(namespace="").matches(update_cm, "x", "")


def test_rule_times_limits_how_often_it_acts() -> None:
    info = request_info("GET", "/api/v1/pods", {})
    rule = _rule(match=Match.of(), action=too_many_requests(), times=2)
    assert [rule.take(info, "c", "") for _ in range(4)] == [True, True, False, False]
    assert rule.hits == 2
    assert rule.exhausted


def test_rule_probability_is_seeded_and_repeatable() -> None:
    info = request_info("GET", "/api/v1/pods", {})

    def draws(seed: int) -> list[bool]:
        rule = _rule(match=Match.of(), action=Delay(0), probability=0.5, seed=seed)
        return [rule.take(info, "c", "") for _ in range(200)]

    first, again, other = draws(7), draws(7), draws(8)
    assert first == again
    assert first != other
    assert 60 < sum(first) < 140  # about half, with a wide margin


def test_cut_watch_rules_leave_other_requests_alone() -> None:
    rule = _rule(match=Match.of(resource="pods"), action=CutWatch(after_events=1))
    assert not rule.take(request_info("GET", "/api/v1/pods", {}), "c", "")
    assert rule.take(request_info("GET", "/api/v1/pods", {"watch": "1"}), "c", "")
    with pytest.raises(ValueError, match="after_events or after_seconds"):
        CutWatch()


def test_bad_rule_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="probability"):
        _rule(match=Match.of(), action=Delay(0), probability=1.5)
    with pytest.raises(ValueError, match="times"):
        _rule(match=Match.of(), action=Delay(0), times=-1)


def test_status_body_is_a_metav1_status() -> None:
    body = json.loads(status_body(Respond(429, retry_after=2.4)))
    assert body["kind"] == "Status"
    assert body["code"] == 429
    assert body["reason"] == "TooManyRequests"
    assert body["details"]["retryAfterSeconds"] == 2
    assert json.loads(status_body(Respond(503)))["reason"] == "ServiceUnavailable"
    assert json.loads(status_body(Respond(504)))["reason"] == "Timeout"
    assert json.loads(status_body(Respond(500)))["reason"] == "InternalError"


def _entry(seq: int, client: str, verb: str, status: int, rv: str | None, **kw) -> LogEntry:
    return LogEntry(
        seq=seq,
        client=client,
        user=client,
        user_agent="",
        method="",
        path="",
        query="",
        verb=verb,
        resource=kw.pop("resource", "configmaps"),
        subresource=None,
        namespace="a",
        name=kw.pop("name", "c"),
        started=float(seq),
        started_wall=float(seq),
        status=status,
        resource_version=rv,
        **kw,
    )


def test_log_orders_writes_by_revision_not_arrival() -> None:
    log = FaultLog()
    log._append(_entry(0, "a", "update", 200, "30"))
    log._append(_entry(1, "b", "update", 200, "20"))
    log._append(_entry(2, "a", "get", 200, None))
    log._append(_entry(3, "a", "update", 409, None, reason="Conflict"))
    log._append(_entry(4, "b", "create", 201, "40"))
    assert [e.seq for e in log.writes()] == [1, 0, 4]
    assert [e.seq for e in log.writes(ok=False)] == [1, 0, 4, 3]
    last_a = log.last_write("a")
    first_b = log.first_write("b")
    assert last_a is not None
    assert first_b is not None
    assert (last_a.seq, first_b.seq) == (0, 1)
    assert log.last_write("nobody") is None
    assert log.counts("client", "status")[("a", 200)] == 2
    assert log.counts()[("a", "update", 409)] == 1
    assert len(log.entries(client="b", verb={"create", "update"})) == 2
    with pytest.raises(ValueError, match="cannot count by"):
        log.counts("colour")
    assert "#4 b create configmaps a/c -> 201 [forward] rv=40" in log.dump()


def test_event_splitter_finds_json_and_protobuf_event_ends() -> None:
    from kubeloop.testing._faultwire import EventSplitter as _EventSplitter

    json_stream = _EventSplitter("application/json")
    assert json_stream.ends(b'{"a":1}\n{"b"') == [8]
    assert json_stream.ends(b':2}\n{"c":3}\n') == [4, 12]
    frames = b"".join(len(p).to_bytes(4, "big") + p for p in (b"abc", b"", b"hello"))
    for size in (1, 2, 3, 5, len(frames)):  # however the stream is chunked
        proto = _EventSplitter("application/vnd.kubernetes.protobuf;stream=watch")
        ends, offset = [], 0
        for i in range(0, len(frames), size):
            ends += [offset + e for e in proto.ends(frames[i : i + size])]
            offset += len(frames[i : i + size])
        assert ends == [7, 11, 20], size


def test_importing_kubeloop_testing_stays_light() -> None:
    import subprocess
    import sys

    code = (
        "import sys, kubeloop.testing as t\n"
        "heavy = [m for m in ('kubeloop.testing.faults', 'kubeloop.testing.oracles',"
        " 'cryptography.x509') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert t.FaultProxy.__name__ == 'FaultProxy'\n"
        "assert 'kubeloop.testing.faults' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)

"""The proxy-log oracles of tests/faults/cache_faults.py on hand-made logs: what they count
and what they leave alone (no cluster: the scenarios themselves run in the matrix)."""

from __future__ import annotations

from kubeloop.testing.faults import LogEntry
from tests.faults.cache_faults import (
    LIST_HANG_TIMEOUT,
    list_storms,
    seal_misreads,
    writes_after_stepdown,
)


def entry(
    started: float,
    *,
    client: str = "op",
    verb: str = "list",
    resource: str = "configmaps",
    namespace: str | None = None,
    name: str | None = None,
    status: int = 0,
    finished: float | None = None,
    query: str = "",
    reason: str | None = None,
) -> LogEntry:
    return LogEntry(
        seq=0,
        client=client,
        user=client,
        user_agent="test",
        method="GET",
        path="/",
        query=query,
        verb=verb,
        resource=resource,
        subresource=None,
        namespace=namespace,
        name=name,
        started=started,
        started_wall=started,
        status=status,
        finished=finished,
        reason=reason,
    )


def attempts(*starts: float, ns: str | None = None) -> list[LogEntry]:
    """Reflector attempts beginning at ``starts``: three tries of the client each, the
    retries 0.15 and 0.3 s after each timeout."""
    t = LIST_HANG_TIMEOUT
    return [entry(s + d, namespace=ns) for s in starts for d in (0.0, t + 0.15, 2 * t + 0.45)]


def test_a_reflector_that_backs_off_makes_no_storm() -> None:
    # each attempt starts after the last try's timeout plus a backoff of at least 0.8 s
    last = 2 * LIST_HANG_TIMEOUT + 0.45
    first, second = 0.0, last + LIST_HANG_TIMEOUT + 0.9
    log = attempts(first, second, second + last + LIST_HANG_TIMEOUT + 1.7, ns="a")
    assert list_storms(log, {"op"}) == []


def test_an_attempt_right_after_a_timeout_is_a_storm_per_informer() -> None:
    last = 2 * LIST_HANG_TIMEOUT + 0.45
    at_once = attempts(0.0, last + LIST_HANG_TIMEOUT + 0.02)  # the cluster-wide informer
    backed_off = attempts(0.0, last + LIST_HANG_TIMEOUT + 1.0, ns="a")
    storms = list_storms([*at_once, *backed_off], {"op"})
    assert len(storms) == 1, storms
    assert " in a " not in storms[0], storms


def test_answered_lists_and_other_clients_are_not_counted() -> None:
    answered = [entry(t, status=200) for t in (0.0, 0.01, 0.02, 0.03, 0.04)]
    theirs = [entry(t, client="user") for t in (0.0, 0.01, 0.02, 0.03, 0.04)]
    assert list_storms([*answered, *theirs], {"op"}) == []


def write(started: float, client: str = "old", resource: str = "packs") -> LogEntry:
    return entry(started, client=client, verb="update", resource=resource, status=200)


def lease(started: float, verb: str = "get", status: int = 200) -> LogEntry:
    return entry(
        started, client="old", verb=verb, resource="leases", status=status, finished=started + 0.01
    )


def test_writes_after_the_leader_read_the_stolen_lease_are_counted() -> None:
    log = [write(0.5), lease(1.2), write(1.3), write(1.4, resource="events"), write(1.5, "new")]
    late = writes_after_stepdown(log, "old", stolen=1.0)
    assert len(late) == 1, late
    assert "packs" in late[0], late


def test_writes_before_the_read_or_after_taking_the_lease_again_are_not() -> None:
    # in flight when it read the Lease; then its own successful renewal much later
    log = [write(1.15), lease(1.2), lease(5.0, verb="update"), write(5.1)]
    assert writes_after_stepdown(log, "old", stolen=1.0) == []


def seal(verb: str, status: int, *, client: str = "op", reason: str | None = None) -> LogEntry:
    return entry(0.0, client=client, verb=verb, name="p-0-seal", status=status, reason=reason)


def test_a_replacement_as_asked_is_no_misread() -> None:
    log = [seal("create", 201), seal("delete", 200), seal("create", 201)]
    assert seal_misreads(log, "p-0", [3, 1]) == []
    assert seal_misreads([seal("create", 201)], "p-2", [2, 2]) == []  # another Pack's


def test_a_refused_create_and_a_second_delete_are_misreads() -> None:
    refused = seal("create", 409, reason="AlreadyExists")
    log = [seal("create", 201), seal("delete", 200), seal("create", 201), refused]
    [missed] = seal_misreads(log, "p-0", [3, 1])
    assert "1 seal creates refused AlreadyExists" in missed
    # the unchanged spec asked for no replacement: its seal deleted is a read still
    # showing a deleted seal
    [over] = seal_misreads([seal("delete", 200), seal("create", 201)], "p-0", [2, 2])
    assert "1 seals deleted" in over
    assert "0 replacements" in over


def test_the_workloads_writes_and_failed_deletes_are_not_counted() -> None:
    log = [seal("delete", 200, client="user"), seal("delete", 404, reason="NotFound")]
    assert seal_misreads(log, "p-0", [2, 2]) == []

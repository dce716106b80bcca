"""The watch event of our own write, recognised by its resourceVersion: the client recorded
that version's managedFields summary from the write's result, so the informer does not
summarize it again. Everything else about the event is unchanged (the store takes it, the
handlers get it); a new version, a deletion and a relist are never taken for an echo."""

from __future__ import annotations

from typing import Any

import pytest

import kubeloop._informer as informer_module
from kubeloop import CONFIGMAPS, Client, ClusterConfig
from kubeloop._event import Deleted
from kubeloop._informer import Informer
from kubeloop._writers import Writer, WriterLog, writers_of

T1, T2 = "2026-12-05T10:00:01Z", "2026-12-05T10:00:02Z"


def cm(rv: str, manager: str = "ctl", time: str = T1, uid: str = "u1") -> dict[str, Any]:
    """A ConfigMap as the server sends it: with managedFields."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "c",
            "namespace": "a",
            "uid": uid,
            "resourceVersion": rv,
            "managedFields": [
                {"manager": manager, "operation": "Update", "time": time, "fieldsV1": {}}
            ],
        },
        "data": {"rv": rv},
    }


@pytest.fixture
def summaries(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The resourceVersions the informer summarized, in order."""
    seen: list[str] = []

    def counting(obj: dict[str, Any]) -> Any:
        seen.append(obj["metadata"]["resourceVersion"])
        return writers_of(obj)

    monkeypatch.setattr(informer_module, "writers_of", counting)
    return seen


def informer() -> tuple[Informer, WriterLog]:
    client = Client(ClusterConfig("https://h"), qps=None)
    inf = Informer(client, CONFIGMAPS, namespace="a")
    return inf, client.writers


def test_the_log_holds_a_version_only_as_recorded() -> None:
    log = WriterLog()
    log.record(cm("5"))
    assert log.holds("u1", "5")
    assert not log.holds("u1", "6"), "a new version is not an echo"
    assert not log.holds("u2", "5"), "another object (uid) is not an echo"
    assert not log.holds("", "5")
    log.forget(cm("5"))
    assert not log.holds("u1", "5"), "forgotten (deleted): never an echo"


def test_the_echo_of_our_write_is_not_summarized_again(summaries: list[str]) -> None:
    inf, log = informer()
    transform = inf.reflector.options.transform
    assert transform is not None
    stored = transform(cm("5"))  # the informer saw version 5 (a list or a watch event)
    assert summaries == ["5"]
    assert "managedFields" not in stored["metadata"], "the default transform still ran"
    log.refresh(cm("6", manager="me", time=T2))  # our write's result: version 6
    echo = transform(cm("6", manager="me", time=T2))  # its watch event
    assert summaries == ["5"], "the echo's summary was recorded from the write's result"
    assert "managedFields" not in echo["metadata"]
    assert echo["data"] == {"rv": "6"}
    assert log.at({"metadata": {"uid": "u1", "resourceVersion": "6"}}) == (
        Writer("me", "Update", "", T2),
    )


def test_a_new_version_is_summarized(summaries: list[str]) -> None:
    inf, log = informer()
    transform = inf.reflector.options.transform
    assert transform is not None
    transform(cm("5"))
    log.refresh(cm("6", manager="me"))
    transform(cm("7", manager="other", time=T2))  # someone else's write after ours
    assert summaries == ["5", "7"]
    assert log.holds("u1", "7")
    assert log.at({"metadata": {"uid": "u1", "resourceVersion": "7"}}) == (
        Writer("other", "Update", "", T2),
    )


def test_a_result_the_watch_delivered_first_is_not_summarized_twice() -> None:
    log = WriterLog()
    log.record(cm("6", manager="me"))  # the watch event came before the write's answer
    log.refresh(cm("6", manager="changed"))  # the same version: nothing to redo
    assert log.at({"metadata": {"uid": "u1", "resourceVersion": "6"}}) == (
        Writer("me", "Update", "", T1),
    )
    log.refresh(cm("8", manager="me", time=T2))
    assert log.holds("u1", "8")


def test_a_deletion_is_never_skipped(summaries: list[str]) -> None:
    inf, log = informer()
    transform = inf.reflector.options.transform
    assert transform is not None
    handled: list[object] = []
    inf.add_handler(handled.append)
    obj = transform(cm("5"))
    inf.store.put(obj)
    inf._dispatch(Deleted(obj))  # as the reflector emits a watch DELETED
    assert [type(e).__name__ for e in handled] == ["Deleted"]
    assert not log.holds("u1", "5"), "the log forgot it"
    transform(cm("5"))  # the same version again (a recreation's list): summarized anew
    assert summaries == ["5", "5"]


def test_a_relist_still_replaces_what_an_echo_stored(summaries: list[str]) -> None:
    inf, log = informer()
    transform = inf.reflector.options.transform
    assert transform is not None
    inf.store.put(transform(cm("5")))
    log.refresh(cm("6", manager="me"))
    inf.store.put(transform(cm("6", manager="me")))  # the echo: stored like any event
    assert inf.store.resource_version("a/c") == "6"
    changes = inf.store.replace([transform(cm("9", manager="other"))])
    assert [(old["data"], new["data"]) for old, new in changes.updated] == [
        ({"rv": "6"}, {"rv": "9"})
    ]
    assert inf.store.resource_version("a/c") == "9"
    assert summaries == ["5", "9"]

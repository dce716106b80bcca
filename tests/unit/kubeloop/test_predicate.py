from __future__ import annotations

import copy
from typing import Any

import pytest

from kubeloop._event import Added, Deleted, Event, Generic, Updated
from kubeloop._predicate import (
    Predicate,
    all_of,
    annotations_changed,
    any_of,
    changed_paths,
    field_changed,
    generation_changed,
    label_selector,
    labels_changed,
    not_,
    object_filter,
    resource_version_changed,
)


def obj(
    *,
    generation: int = 1,
    rv: str = "100",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    replicas: int = 1,
    status: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pool", "generation": generation, "resourceVersion": rv}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    out: dict[str, Any] = {"metadata": meta, "spec": {"replicas": replicas}}
    if status is not None:
        out["status"] = status
    return out


def non_updates(o: dict[str, Any]) -> list[Event]:
    return [Added(o), Deleted(o), Deleted(o, final_state_unknown=True), Generic(o)]


class TestGenerationChanged:
    def test_passes_spec_change(self) -> None:
        old = obj(generation=1, rv="1", replicas=1)
        new = obj(generation=2, rv="2", replicas=2)
        assert generation_changed(Updated(old, new))

    def test_drops_status_only_update(self) -> None:
        old = obj(rv="1")
        new = obj(rv="2", status={"scaleOperation": "inactive"})
        assert not generation_changed(Updated(old, new))

    def test_drops_label_and_annotation_only_update(self) -> None:
        old = obj(rv="1")
        assert not generation_changed(Updated(old, obj(rv="2", labels={"a": "b"})))
        assert not generation_changed(Updated(old, obj(rv="2", annotations={"a": "b"})))

    def test_drops_resync(self) -> None:
        o = obj()
        assert not generation_changed(Updated(o, copy.deepcopy(o)))

    def test_other_events_pass(self) -> None:
        assert all(generation_changed(e) for e in non_updates(obj()))


class TestMetadataPredicates:
    def test_resource_version_changed(self) -> None:
        o = obj(rv="1")
        assert resource_version_changed(Updated(o, obj(rv="2")))
        assert not resource_version_changed(Updated(o, copy.deepcopy(o)))
        assert all(resource_version_changed(e) for e in non_updates(o))

    def test_labels_changed(self) -> None:
        assert labels_changed(Updated(obj(labels={"a": "1"}), obj(labels={"a": "2"})))
        assert labels_changed(Updated(obj(), obj(labels={"a": "1"})))
        assert not labels_changed(Updated(obj(labels={"a": "1"}), obj(labels={"a": "1"}, rv="2")))
        # Absent and empty labels are the same set.
        assert not labels_changed(Updated(obj(), obj(labels={})))
        assert all(labels_changed(e) for e in non_updates(obj()))

    def test_annotations_changed(self) -> None:
        assert annotations_changed(Updated(obj(), obj(annotations={"x": "y"})))
        assert not annotations_changed(Updated(obj(labels={"a": "1"}), obj(labels={"a": "2"})))
        assert all(annotations_changed(e) for e in non_updates(obj()))


class TestFieldChanged:
    def test_spec_field(self) -> None:
        pred = field_changed("spec.replicas")
        assert pred(Updated(obj(replicas=1), obj(replicas=3)))
        assert not pred(Updated(obj(replicas=1), obj(replicas=1, labels={"a": "b"})))
        assert all(pred(e) for e in non_updates(obj()))

    def test_appearing_field_counts(self) -> None:
        pred = field_changed("status.scaleOperation")
        assert pred(Updated(obj(), obj(status={"scaleOperation": "active"})))
        assert not pred(Updated(obj(), obj(status={})))

    def test_bracketed_key_with_dots(self) -> None:
        pred = field_changed("metadata.labels[app.kubernetes.io/name]")
        old = obj(labels={"app.kubernetes.io/name": "web"})
        assert pred(Updated(old, obj(labels={"app.kubernetes.io/name": "db"})))
        assert not pred(Updated(old, obj(labels={"app.kubernetes.io/name": "web", "x": "y"})))

    @pytest.mark.parametrize("path", ["", "spec..replicas", ".spec", "spec.", "a[]", "a[b"])
    def test_rejects_bad_path(self, path: str) -> None:
        with pytest.raises(ValueError, match="invalid field path"):
            field_changed(path)

    def test_has_readable_name(self) -> None:
        assert field_changed("spec.replicas").__name__ == "field_changed('spec.replicas')"


class TestCombinators:
    def test_plain_function_is_a_predicate(self) -> None:
        def big(event: Event) -> bool:
            return bool(event.obj["spec"]["replicas"] > 10)

        pred: Predicate = all_of(generation_changed, big)
        assert pred(Updated(obj(generation=1), obj(generation=2, replicas=11)))
        assert not pred(Updated(obj(generation=1), obj(generation=2, replicas=1)))
        assert not pred(Updated(obj(replicas=1), obj(replicas=11)))

    def test_all_any_not(self) -> None:
        yes: Predicate = lambda e: True  # noqa: E731
        no: Predicate = lambda e: False  # noqa: E731
        event = Added(obj())
        assert all_of(yes, yes)(event)
        assert not all_of(yes, no)(event)
        assert all_of()(event)
        assert any_of(no, yes)(event)
        assert not any_of(no, no)(event)
        assert not any_of()(event)
        assert not_(yes)(event) is False
        assert not_(no)(event) is True

    def test_short_circuit(self) -> None:
        calls: list[str] = []

        def record(name: str, result: bool) -> Predicate:
            def pred(event: Event) -> bool:
                calls.append(name)
                return result

            return pred

        all_of(record("a", False), record("b", True))(Added(obj()))
        any_of(record("c", True), record("d", True))(Added(obj()))
        assert calls == ["a", "c"]

    def test_spec_or_status_wiped(self) -> None:
        # The documented remedy for GenerationChanged not healing a wiped status.
        pred = any_of(generation_changed, field_changed("status"))
        status = {"observedGeneration": 1}
        assert pred(Updated(obj(status=status), obj(rv="2")))
        assert not pred(Updated(obj(status=status), obj(rv="2", status=status, labels={"a": "b"})))

    def test_object_filter_uses_new_object(self) -> None:
        pred = object_filter(lambda o: o["spec"]["replicas"] > 1)
        assert pred(Updated(obj(replicas=1), obj(replicas=2)))
        assert not pred(Updated(obj(replicas=2), obj(replicas=1)))
        assert pred(Deleted(obj(replicas=5)))


class TestLabelSelector:
    def test_plain_match_labels(self) -> None:
        pred = label_selector({"app": "web"})
        assert pred(Added(obj(labels={"app": "web", "tier": "x"})))
        assert not pred(Added(obj(labels={"app": "db"})))
        assert not pred(Added(obj()))

    def test_full_selector_expressions(self) -> None:
        pred = label_selector(
            {
                "matchLabels": {"app": "web"},
                "matchExpressions": [
                    {"key": "env", "operator": "In", "values": ["prod", "staging"]},
                    {"key": "tier", "operator": "NotIn", "values": ["cache"]},
                    {"key": "owner", "operator": "Exists"},
                    {"key": "legacy", "operator": "DoesNotExist", "values": []},
                ],
            }
        )
        base = {"app": "web", "env": "prod", "owner": "team-a"}
        assert pred(Added(obj(labels=base)))
        assert pred(Added(obj(labels={**base, "tier": "frontend"})))
        assert not pred(Added(obj(labels={**base, "tier": "cache"})))
        assert not pred(Added(obj(labels={**base, "env": "dev"})))
        assert not pred(Added(obj(labels={k: v for k, v in base.items() if k != "env"})))
        assert not pred(Added(obj(labels={k: v for k, v in base.items() if k != "owner"})))
        assert not pred(Added(obj(labels={**base, "legacy": "true"})))
        assert not pred(Added(obj(labels={**base, "app": "db"})))

    def test_not_in_matches_absent_label(self) -> None:
        pred = label_selector(
            {"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["cache"]}]}
        )
        assert pred(Added(obj()))

    def test_updated_tests_new_object(self) -> None:
        pred = label_selector({"app": "web"})
        assert pred(Updated(obj(labels={"app": "db"}), obj(labels={"app": "web"})))
        assert not pred(Updated(obj(labels={"app": "web"}), obj(labels={"app": "db"})))

    def test_empty_selector_matches_everything(self) -> None:
        assert label_selector({})(Added(obj()))
        assert label_selector({"matchLabels": {}, "matchExpressions": []})(Added(obj()))

    @pytest.mark.parametrize(
        ("selector", "message"),
        [
            ({"matchExpressions": [{"key": "a", "operator": "In"}]}, "needs values"),
            ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "needs values"),
            (
                {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
                "takes no values",
            ),
            ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}, "unknown"),
            ({"matchExpressions": [{"operator": "Exists"}]}, "non-empty 'key'"),
            ({"app": 1}, "must map a string to a string"),
        ],
    )
    def test_rejects_malformed(self, selector: dict[str, Any], message: str) -> None:
        with pytest.raises(ValueError, match=message):
            label_selector(selector)


class TestChangedPaths:
    def test_finds_noisy_status_timestamp(self) -> None:
        old = obj(rv="1", status={"phase": "Ready", "lastCheckedAt": "2024-01-01T00:00:00Z"})
        new = obj(rv="2", status={"phase": "Ready", "lastCheckedAt": "2024-01-01T00:00:05Z"})
        new["metadata"]["managedFields"] = [{"manager": "x"}]
        assert changed_paths(old, new) == ["status.lastCheckedAt"]

    def test_added_and_removed_leaves(self) -> None:
        old = obj(status={"a": 1})
        new = obj(status={"b": {"c": 2}}, labels={"app.kubernetes.io/name": "web"})
        assert changed_paths(old, new) == [
            "metadata.labels[app.kubernetes.io/name]",
            "status.a",
            "status.b.c",
        ]

    def test_lists_compared_whole(self) -> None:
        old = obj(status={"conditions": [{"type": "Ready", "status": "True"}]})
        new = obj(status={"conditions": [{"type": "Ready", "status": "False"}]})
        assert changed_paths(old, new) == ["status.conditions"]

    def test_type_change_and_empty_map(self) -> None:
        assert changed_paths(obj(), obj(status={})) == ["status"]
        assert changed_paths(obj(status={"x": None}), obj(status={"x": {"y": 1}})) == ["status.x"]

    def test_default_ignores_and_custom_ignore(self) -> None:
        old, new = obj(generation=1, rv="1"), obj(generation=2, rv="2", replicas=5)
        assert changed_paths(old, new) == ["spec.replicas"]
        assert changed_paths(old, new, ignore=()) == [
            "metadata.generation",
            "metadata.resourceVersion",
            "spec.replicas",
        ]
        assert changed_paths(old, new, ignore=["spec", "metadata"]) == []

    def test_identical(self) -> None:
        o = obj(status={"a": [1, 2]})
        assert changed_paths(o, copy.deepcopy(o)) == []

    def test_round_trips_through_field_changed(self) -> None:
        old = obj(labels={"app.kubernetes.io/name": "web"})
        new = obj(labels={"app.kubernetes.io/name": "db"})
        (path,) = changed_paths(old, new)
        assert field_changed(path)(Updated(old, new))

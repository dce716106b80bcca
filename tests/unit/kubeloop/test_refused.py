"""The words for a LIST or WATCH the apiserver refuses: the resource, the answer, and the
command that checks it."""

from __future__ import annotations

from kubeloop import CONFIGMAPS, Conflict, Forbidden, NotFound, Resource
from kubeloop._refused import explain_refusal

GADGETS = Resource("example.dev", "v1", "gadgets", "Gadget")


def test_a_custom_resource_not_served_asks_for_its_crd() -> None:
    err = NotFound(404, "NotFound", "404 page not found")
    assert explain_refusal(GADGETS, "ns", "list", err) == (
        "the API server does not serve gadgets (example.dev/v1, kind Gadget): list answered"
        " 404; is the CRD installed? kubectl get crd gadgets.example.dev"
    )


def test_a_built_in_kind_not_served_points_at_the_version() -> None:
    cronjobs = Resource("batch", "v1beta1", "cronjobs", "CronJob")
    err = NotFound(404, "NotFound", "404 page not found")
    text = explain_refusal(cronjobs, None, "watch", err)
    assert text is not None
    assert "cronjobs (batch/v1beta1, kind CronJob): watch answered 404" in text
    assert "kubectl api-resources" in text
    assert "CRD" not in text


def test_rbac_names_the_verb_the_scope_and_the_check() -> None:
    err = Forbidden(403, "Forbidden", 'configmaps is forbidden: User "op" cannot list ...')
    text = explain_refusal(CONFIGMAPS, None, "list", err)
    assert text is not None
    assert text.startswith("RBAC refuses list on configmaps (v1, kind ConfigMap) cluster-wide:")
    assert "kubectl auth can-i list configmaps --all-namespaces --as <its user>" in text


def test_other_failures_are_not_refusals() -> None:
    assert explain_refusal(GADGETS, "ns", "list", Conflict(409, "Conflict", "x")) is None
    assert explain_refusal(GADGETS, "ns", "list", OSError("connection refused")) is None

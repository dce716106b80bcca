"""What a LIST or WATCH answered 404, 403 or 400 means, in words a user can act on.

The apiserver answers a LIST for a resource it does not serve with a bare ``404 page not
found``: no kind, no group, no hint. The usual cause is a CRD that was never applied (or
a version it does not serve); a 403 is RBAC refusing the verb; a 400 is a selector the
apiserver will not take (a field selector on a field the kind does not support, say
``spec.replicas`` on ConfigMaps). All are configuration, not blips, so the reflector says
so once, with the resource and what to check, instead of repeating the raw answer.
"""

from __future__ import annotations

from kubeloop._errors import ApiError, BadRequest, Forbidden, NotFound
from kubeloop._resource import Resource


def describe_resource(resource: Resource) -> str:
    """``greetings (tutorial.kubeloop.dev/v1, kind Greeting)``: group, version and resource."""
    return f"{resource.plural} ({resource.api_version}, kind {resource.kind})"


def explain_refusal(
    resource: Resource, namespace: str | None, verb: str, err: BaseException
) -> str | None:
    """The reason ``verb`` on ``resource`` failed, with what to check; None if ``err`` is
    not a refusal (404, 403 or 400) but an ordinary failure to retry quietly."""
    if not isinstance(err, ApiError):
        return None
    what = describe_resource(resource)
    if isinstance(err, NotFound):
        # a CRD's group always has a dot; the built-in groups without one (apps, batch,
        # policy, the core group) cannot be missing, only asked for at a wrong version
        if "." in resource.group:
            hint = f"is the CRD installed? kubectl get crd {resource.key}"
        else:
            hint = "check the group and version: kubectl api-resources"
        return f"the API server does not serve {what}: {verb} answered 404; {hint}"
    if isinstance(err, Forbidden):
        scope = f"in namespace {namespace}" if namespace else "cluster-wide"
        check = f"kubectl auth can-i {verb} {resource.key}" + (
            f" -n {namespace}" if namespace else " --all-namespaces"
        )
        return (
            f"RBAC refuses {verb} on {what} {scope}: {err.message or err}; "
            f"grant it to this identity (check: {check} --as <its user>)"
        )
    if isinstance(err, BadRequest):
        # the request's own parameters: for an informer, only its selectors vary
        return (
            f"the API server refuses {verb} on {what}: {err.message or err}; check the "
            "label_selector and field_selector given to for_/owns/watches or the informer"
        )
    return None

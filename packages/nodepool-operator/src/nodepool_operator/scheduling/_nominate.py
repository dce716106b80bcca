"""The nomination write: tell kube-scheduler which new node the plan put a pending pod on.

Why: a pod's ``status.nominatedNodeName`` is the one place outside the scheduler that it
reads as "try this node first". ``findNodesThatFitPod`` in kube-scheduler v1.37.2 filters the
nominated node alone before any other and, if it passes, binds the pod there without
scoring; and the scheduler's nominator counts a nominated pod on its node, so pods of the same
or lower priority do not take the room the plan kept for it. Both hold with the KEP-5278
gates on or off. The write goes to the pod's status subresource (``pods/status`` patch),
never to the user's spec, so GitOps tools and admission policies that guard the spec see
nothing. What the scheduler does with a nomination it cannot honour (it drops it on a
failed attempt) is in ``docs/simulation.md``, section "Nominated nodes".

Pure: a function of the pod's view (read at the boundary, :func:`~._pods.pod_view`) and the
planned node's name.
"""

from __future__ import annotations

import re
from typing import Any, Final

from ._pods import Pod, pod_view
from ._views import PodView

__all__ = ["NOMINATION_FIELD", "nomination_patch"]

#: The pod status field the patch writes.
NOMINATION_FIELD: Final = "nominatedNodeName"
#: A Node name: a DNS subdomain (what the apiserver's ValidateNodeName accepts).
_SUBDOMAIN: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def nomination_patch(pod: Pod | PodView, node_name: str | None) -> dict[str, Any] | None:
    """The JSON merge patch for ``pods/<name>/status`` that nominates ``pod`` to
    ``node_name`` (``None``: withdraws our nomination); ``None`` when there is nothing to write.

    Nothing to write: the pod is already nominated so; it is bound (the apiserver refuses a
    nomination on a bound pod while ``ClearingNominatedNodeNameAfterBinding`` is on, and it
    would only be stale otherwise); it is being deleted. The patch carries the pod's
    ``resourceVersion`` as a precondition: a pod bound or renominated since it was read
    makes the server answer 409 instead of taking a nomination made from an old view.

    Raises :class:`ValueError` for a ``node_name`` that is not a valid Node name.
    """
    if node_name is not None and (len(node_name) > 253 or not _SUBDOMAIN.fullmatch(node_name)):
        raise ValueError(
            f"status.{NOMINATION_FIELD}: {node_name!r} is not a valid Node name "
            "(a lower-case DNS subdomain of at most 253 characters)"
        )
    view = pod_view(pod)
    if view.node_name or view.terminating or view.nominated == node_name:
        return None
    patch: dict[str, Any] = {"status": {NOMINATION_FIELD: node_name}}
    if view.version:
        patch["metadata"] = {"resourceVersion": view.version}
    return patch

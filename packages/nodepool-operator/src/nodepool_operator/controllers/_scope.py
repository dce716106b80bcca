"""Which objects this operator handles, and the labels that put a pool's Nodes in that scope.

``settings.label_selector`` scopes NodePools. Nodes have no selector of their own, so the
operator copies the selector's ``key=value`` terms onto every Node it registers: the Node
watch can then be scoped the same way, and whoever owns the scope (a shard, a test run)
can find its Nodes by label.
"""

from __future__ import annotations

from typing import Final

from kubeloop import parse_label_selector

#: Every Node of a pool carries this label, with the pool's name as its value.
POOL_LABEL: Final = "kubeloop.dev/nodepool"


def equality_labels(selector: str | None) -> dict[str, str]:
    """The ``key=value`` (or ``key==value``) terms of a label selector as labels.

    Set-based terms (``in``, ``notin``, ``!=``, ``key``, ``!key``) name no single value and
    are left out. The selector is parsed as the apiserver would (kubeloop's parser): one it
    cannot parse raises :class:`ValueError` naming it.

    >>> equality_labels("e2e.kubeloop.dev/run=ab12, tier in (a,b), x!=y")
    {'e2e.kubeloop.dev/run': 'ab12'}
    """
    return dict(parse_label_selector(selector or "").equalities)


def node_selector(run_labels: dict[str, str]) -> str:
    """The selector of the Nodes of pools in scope: pool Nodes carrying ``run_labels``.

    >>> node_selector({"shard": "a"})
    'kubeloop.dev/nodepool,shard=a'
    """
    return ",".join([POOL_LABEL, *(f"{k}={v}" for k, v in sorted(run_labels.items()))])

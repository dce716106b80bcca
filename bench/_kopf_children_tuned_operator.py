"""kopf tuned, the child-owning job: see ``bench/_kopf_children.py``.

Run as ``KUBECONFIG=K python -m kopf run --quiet --standalone --namespace NS -m
bench._kopf_children_tuned_operator``.
"""

from __future__ import annotations

from bench._kopf_children import register

register(tuned=True)

"""The operator's controllers; each is thin, wired by ``nodepool_operator.operator``.

Besides the controllers' modules, the names that code outside the operator (bench, tests)
relies on: the label on a pool's Nodes and the node template a pool's plan is made with.
"""

from nodepool_operator.controllers._capacity import pool_template
from nodepool_operator.controllers._scope import POOL_LABEL

__all__ = ["POOL_LABEL", "pool_template"]

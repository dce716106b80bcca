"""The Autoscaler controller as observe → decide → act (see :mod:`.controller`)."""

from nodepool_operator.controllers.autoscaler.controller import AutoscalerController

__all__ = ["AutoscalerController"]

"""Errors raised while providing a local control plane."""

from __future__ import annotations


class EnvtestError(Exception):
    """Base class for local control-plane failures."""


class AssetsError(EnvtestError):
    """A control-plane binary is missing or could not be built."""


class StartError(EnvtestError):
    """A component did not start; the message carries the tail of its log."""

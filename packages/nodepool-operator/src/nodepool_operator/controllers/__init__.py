"""The operator's controllers; each is thin, wired by ``nodepool_operator.operator``."""

"""The NodePool + Autoscaler operator, built on kubeloop's public API."""

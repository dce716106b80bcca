"""The instance type and EKS cluster the bootstrap unit tests write user data for."""

from __future__ import annotations

from nodepool_operator.cloud import CATALOGUE, ClusterInfo

#: 2 vCPUs, 8 GiB, 29 pods (3 ENIs of 10 addresses).
M5 = next(t for t in CATALOGUE if t.name == "m5.large")
CLUSTER = ClusterInfo(
    name="demo",
    endpoint="https://ABC.gr7.us-east-1.eks.amazonaws.com",
    certificate_authority="LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==",
    service_cidr="10.100.0.0/16",
)

"""A Website kind written as Python types with kubeloop.crd: the example of docs/crds.md.

``kubeloop manifests website_api --out .`` (run here) writes its CRD,
``examples.kubeloop.dev_websites.yaml``; tests/integration/test_crd_example.py applies it to
a real apiserver and checks that the apiserver and :func:`parse_website` agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Annotated, Any

from kubeloop.crd import (
    AGE,
    Condition,
    CustomResource,
    ListMapKey,
    ListSet,
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinLength,
    Name,
    ObjectMeta,
    Pattern,
    PrinterColumn,
    Quantity,
    Scale,
    Version,
    exactly_one_of,
    less_or_equal,
    min_duration,
    not_negative,
    parse,
    reserved_keys,
    rules,
)

# --8<-- [start:types]
_HOSTNAME = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


@rules(exactly_one_of("gitRepository", "bucket"))
@dataclass(frozen=True, kw_only=True)
class Source:
    """Where the site's files come from: exactly one of gitRepository and bucket."""

    git_repository: Annotated[str, Pattern(r"^https://"), MaxLength(2048)] | None = None
    """A Git repository to serve, cloned over HTTPS."""
    bucket: Annotated[str, MinLength(3), MaxLength(63)] | None = None
    """An object storage bucket to serve."""


@rules(less_or_equal("replicas", "maxReplicas"))
@dataclass(frozen=True, kw_only=True)
class WebsiteSpec:
    """WebsiteSpec is the site to serve and how many pods serve it."""

    hostname: Annotated[str, Pattern(_HOSTNAME), MaxLength(253)]
    """The site's DNS name, e.g. www.example.com."""
    source: Source
    """Where the files come from."""
    replicas: Annotated[int, Minimum(0)] = 1
    """How many pods serve the site; `kubectl scale website/NAME --replicas=N` sets it."""
    max_replicas: Annotated[int, Minimum(1), Maximum(100)] = 10
    """The most pods the site may have; replicas stays within it."""
    cache_ttl: Annotated[timedelta, Name("cacheTTL"), min_duration(timedelta(seconds=1))] = (
        timedelta(minutes=5)
    )
    """How long clients may cache a page, as a duration such as 30s or 5m."""
    memory: Annotated[str, Quantity(), not_negative()] | None = None
    """Memory of each pod as a quantity (256Mi)."""
    labels: Annotated[
        dict[str, Annotated[str, MaxLength(63)]],
        MaxProperties(16),
        reserved_keys(
            prefixes=["examples.kubeloop.dev/"], message="examples.kubeloop.dev/ is ours"
        ),
    ] = field(default_factory=dict)
    """Labels of the site's pods."""
    paths: Annotated[
        list[Annotated[str, Pattern(r"^/"), MaxLength(256)]], MaxItems(16), ListSet()
    ] = field(default_factory=list)
    """URL paths served; all when empty."""


@dataclass(frozen=True, kw_only=True)
class WebsiteStatus:
    """WebsiteStatus is what the controller last observed."""

    replicas: Annotated[int, Minimum(0)] = 0
    """Pods serving the site now (the scale subresource's status.replicas)."""
    selector: Annotated[str, MaxLength(1024)] | None = None
    """The label selector of the site's pods, for the scale subresource."""
    url: Annotated[str, MaxLength(2048)] | None = None
    """Where the site answers."""
    conditions: Annotated[list[Condition], ListMapKey("type"), MaxItems(8)] = field(
        default_factory=list
    )
    """The site's conditions (Ready)."""


@dataclass(frozen=True, kw_only=True)
class Website:
    """Website is a static site served by a few pods."""

    metadata: ObjectMeta = field(default_factory=ObjectMeta)
    """Standard object metadata."""
    spec: WebsiteSpec
    """The desired state of the site."""
    status: WebsiteStatus = field(default_factory=WebsiteStatus)
    """The observed state of the site."""


# --8<-- [end:types]


# --8<-- [start:resource]
_COLUMNS = (
    PrinterColumn("Host", ".spec.hostname", "string", "The site's DNS name."),
    PrinterColumn("Replicas", ".spec.replicas", "integer", "Pods wanted."),
    PrinterColumn("URL", ".status.url", "string", "Where the site answers.", priority=1),
    AGE,
)

WEBSITES = CustomResource(
    "examples.kubeloop.dev",
    "Website",
    "websites",
    versions=(
        Version(
            "v1",
            Website,
            _COLUMNS,
            scale=Scale(".spec.replicas", ".status.replicas", ".status.selector"),
        ),
        # still served for old clients (with a warning); converted by the apiserver, since
        # both versions have the same schema
        Version(
            "v1alpha1",
            Website,
            _COLUMNS,
            deprecated=True,
            deprecation_warning="examples.kubeloop.dev/v1alpha1 Website is deprecated; use v1",
        ),
    ),
    storage="v1",
    short_names=("site",),
)
# --8<-- [end:resource]


# --8<-- [start:parse]
def parse_website(obj: Mapping[str, Any]) -> Website:
    """A Website from its API object, defaults filled in.

    Raises:
        kubeloop.crd.InvalidField: the object breaks the schema; ``path`` names the field
            (``spec.replicas``), as the apiserver does.
    """
    return parse(Website, obj)


# --8<-- [end:parse]

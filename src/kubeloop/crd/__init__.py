"""CRDs from Python types: the markers, the schema generator, the CRD it serves in, and typed
parsing of objects back into the types.

A kind's dataclasses are the one source of its API. :class:`CustomResource` turns them into
a CustomResourceDefinition whose structural schema the apiserver enforces at admission;
:func:`parse` turns an API object back into the dataclasses, filling in the same defaults
and checking the same markers and CEL rules, and names the offending field's path;
:func:`to_api` goes the other way. ``kubeloop manifests MODULE`` writes the YAML.
See ``docs/crds.md``::

    @rules(less_or_equal("replicas", "maxReplicas"))
    @dataclass(frozen=True, kw_only=True)
    class WebsiteSpec:
        '''What to serve.'''

        replicas: Annotated[int, Minimum(0)] = 1
        '''How many pods serve it.'''
        ...

    WEBSITES = CustomResource("example.com", "Website", "websites", (Version("v1", Website),))

Conventions, so that each fact is stated once: a field's attribute docstring is its
``description`` (a generated schema with an undocumented field fails); a plain default is
the schema's ``default``, ``X | None = None`` and ``default_factory`` fields are optional
without one, a field without a default is ``required``; JSON names are the camelCase of the
Python names unless :class:`Name` says otherwise; ``Literal[...]`` is an ``enum``,
``dict[str, V]`` a map, ``timedelta`` a Go duration (``5m``), ``datetime`` an RFC 3339
``date-time``, a ``str`` marked :class:`Quantity` a Kubernetes quantity.
"""

from kubeloop.crd._definition import AGE, CustomResource, PrinterColumn, Scale, Version
from kubeloop.crd._duration import DURATION_PATTERN, format_duration, parse_duration
from kubeloop.crd._manifests import filename, load, render, write_manifests
from kubeloop.crd._markers import (
    CEL,
    QUANTITY_PATTERN,
    ListMapKey,
    ListSet,
    Maximum,
    MaxItems,
    MaxLength,
    MaxProperties,
    Minimum,
    MinItems,
    MinLength,
    Name,
    Pattern,
    Quantity,
    rules,
)
from kubeloop.crd._meta import Condition, ObjectMeta
from kubeloop.crd._parse import InvalidField, parse, to_api
from kubeloop.crd._rules import (
    all_found_in,
    exactly_one_of,
    key_length,
    keys_match,
    less_or_equal,
    min_duration,
    none_of,
    not_negative,
    reserved_keys,
)
from kubeloop.crd._schema import kind_schema, schema

__all__ = [
    "AGE",
    "CEL",
    "DURATION_PATTERN",
    "QUANTITY_PATTERN",
    "Condition",
    "CustomResource",
    "InvalidField",
    "ListMapKey",
    "ListSet",
    "MaxItems",
    "MaxLength",
    "MaxProperties",
    "Maximum",
    "MinItems",
    "MinLength",
    "Minimum",
    "Name",
    "ObjectMeta",
    "Pattern",
    "PrinterColumn",
    "Quantity",
    "Scale",
    "Version",
    "all_found_in",
    "exactly_one_of",
    "filename",
    "format_duration",
    "key_length",
    "keys_match",
    "kind_schema",
    "less_or_equal",
    "load",
    "min_duration",
    "none_of",
    "not_negative",
    "parse",
    "parse_duration",
    "render",
    "reserved_keys",
    "rules",
    "schema",
    "to_api",
    "write_manifests",
]

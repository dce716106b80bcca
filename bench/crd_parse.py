"""Parse speed of a NodePool: kubeloop.crd's dataclass parser against msgspec Structs.

``kubeloop.crd.parse`` turns an API object into the operator's dataclasses in Python, checking
every marker and CEL mirror and naming the field on error. The yardstick is msgspec (a C
decoder): the same types mirrored as Structs, generated here from the dataclasses' fields
and markers (bounds, lengths, patterns as ``msgspec.Meta``; camelCase and explicit names as
renames), converted with ``msgspec.convert``. The mirror does strictly less work than the
parser (no CEL mirrors, no list-map uniqueness, durations and quantities left as strings), so
its time is a lower bound for a Struct-based parser. In between, kubeloop.crd's own parser
into frozen Struct twins of the dataclasses (same markers; the class-level CEL rules left
out): what choosing Structs over dataclasses changes by itself. No cluster is needed::

    python -m bench.crd_parse [--rounds 2000]

Prints one JSON line: microseconds per parse, median of 5 batches, each way.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time
import types
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import msgspec

from kubeloop import crd
from nodepool_operator.api import NodePool, parse_nodepool

# a pool as a controller reads it: spec with labels, taints and budgets; status with records
POOL: dict[str, Any] = {
    "apiVersion": "kubeloop.dev/v1alpha1",
    "kind": "NodePool",
    "metadata": {"name": "workers", "generation": 7, "labels": {"team": "a"}},
    "spec": {
        "instanceType": "m5.large",
        "targetNodes": 6,
        "maxNodes": 20,
        "memory": "8Gi",
        "labels": {"example.com/team": "web", "tier": "front"},
        "taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}],
        "disruption": {"budgets": [{"nodes": "20%"}, {"nodes": "0", "reasons": ["Drifted"]}]},
    },
    "status": {
        "currentNodes": 6,
        "readyNodes": 6,
        "observedGeneration": 7,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": "6 of 6 nodes ready",
                "lastTransitionTime": "2026-01-02T03:04:05Z",
            }
        ],
        "instances": [
            {"name": f"workers-{i}", "instanceId": f"i-{i:08x}", "state": "running"}
            for i in range(6)
        ],
    },
}

_META = {
    crd.Minimum: "ge",
    crd.Maximum: "le",
    crd.MinLength: "min_length",
    crd.MaxLength: "max_length",
    crd.MinItems: "min_length",
    crd.MaxItems: "max_length",
    crd.MaxProperties: "max_length",
}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def mirror(hint: Any, structs: dict[type, Any]) -> Any:
    """The msgspec type for a dataclass field's hint (markers as Meta)."""
    metas: dict[str, Any] = {}
    if get_origin(hint) is Annotated:
        hint, *markers = get_args(hint)
        for m in markers:
            if type(m) in _META:
                metas[_META[type(m)]] = dataclasses.astuple(m)[0]
            elif isinstance(m, crd.Pattern):
                metas["pattern"] = m.regex
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        inner = mirror(next(a for a in get_args(hint) if a is not type(None)), structs)
        out: Any = inner | None
    elif origin is list:
        out = list[mirror(get_args(hint)[0], structs)]  # type: ignore[misc]
    elif origin is dict:
        out = dict[str, mirror(get_args(hint)[1], structs)]  # type: ignore[misc]
    elif origin is Literal or hint in (int, str, bool, float, datetime):
        out = hint
    elif hint is timedelta:
        out = str
    elif dataclasses.is_dataclass(hint):
        out = struct_of(hint, structs)
    else:
        raise TypeError(hint)
    return Annotated[out, msgspec.Meta(**metas)] if metas else out


def struct_of(cls: Any, structs: dict[type, Any]) -> Any:
    if cls in structs:
        return structs[cls]
    hints = get_type_hints(cls, include_extras=True)
    fields: list[tuple[Any, ...]] = []
    rename: dict[str, str] = {}
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        names = [m.json for m in getattr(hint, "__metadata__", ()) if isinstance(m, crd.Name)]
        rename[f.name] = names[0] if names else _camel(f.name)
        typ = mirror(hint, structs)
        if f.default is not dataclasses.MISSING:
            default = f.default if not isinstance(f.default, timedelta) else "x"
            fields.append((f.name, typ, default))
        elif f.default_factory is not dataclasses.MISSING:
            fields.append((f.name, typ, msgspec.field(default_factory=list)))
        else:
            fields.append((f.name, typ))
    # required fields first, as Python's own signatures want
    fields.sort(key=len)
    structs[cls] = msgspec.defstruct(cls.__name__, fields, rename=rename, kw_only=True)
    return structs[cls]


def same_markers(hint: Any, structs: dict[type, Any]) -> Any:
    """``hint`` with each dataclass replaced by its Struct twin, markers kept."""
    origin = get_origin(hint)
    if origin is Annotated:
        inner, *markers = get_args(hint)
        return Annotated[(same_markers(inner, structs), *markers)]
    if origin in (Union, types.UnionType):
        inner = next(a for a in get_args(hint) if a is not type(None))
        return same_markers(inner, structs) | None
    if origin is list:
        return list[same_markers(get_args(hint)[0], structs)]  # type: ignore[misc]
    if origin is dict:
        return dict[str, same_markers(get_args(hint)[1], structs)]  # type: ignore[misc]
    if dataclasses.is_dataclass(hint):
        return twin_of(hint, structs)
    return hint


def twin_of(cls: Any, structs: dict[type, Any]) -> Any:
    """A frozen Struct with the dataclass's fields, markers and defaults, for kubeloop.crd's
    own parser (its class-level CEL rules left out)."""
    if cls in structs:
        return structs[cls]
    hints = get_type_hints(cls, include_extras=True)
    fields: list[tuple[Any, ...]] = []
    for f in dataclasses.fields(cls):
        typ = same_markers(hints[f.name], structs)
        if f.default is not dataclasses.MISSING:
            fields.append((f.name, typ, f.default))
        elif f.default_factory is not dataclasses.MISSING:
            factory: Any = f.default_factory
            if isinstance(factory, type) and dataclasses.is_dataclass(factory):
                factory = twin_of(factory, structs)
            fields.append((f.name, typ, msgspec.field(default_factory=factory)))
        else:
            fields.append((f.name, typ))
    fields.sort(key=len)
    structs[cls] = msgspec.defstruct(cls.__name__, fields, kw_only=True, frozen=True)
    return structs[cls]


def per_parse(fn: Any, rounds: int) -> float:
    """Microseconds per call, the median of five batches."""
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(rounds):
            fn()
        batches.append((time.perf_counter() - start) / rounds * 1e6)
    return statistics.median(batches)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.crd_parse")
    parser.add_argument("--rounds", type=int, default=2000)
    args = parser.parse_args()
    struct = struct_of(NodePool, {})
    # both read the same object to the same values (the mirror's parse is no empty shortcut)
    mirrored = msgspec.convert(POOL, struct, str_keys=True)
    parsed = parse_nodepool(POOL)
    assert mirrored.spec.target_nodes == parsed.spec.target_nodes == 6
    assert [t.key for t in mirrored.spec.taints] == [t.key for t in parsed.spec.taints]
    twin = twin_of(NodePool, {})
    assert crd.to_api(crd.parse(twin, POOL)) == crd.to_api(parsed)
    dataclass_us = per_parse(lambda: parse_nodepool(POOL), args.rounds)
    twin_us = per_parse(lambda: crd.parse(twin, POOL), args.rounds)
    struct_us = per_parse(lambda: msgspec.convert(POOL, struct, str_keys=True), args.rounds)
    print(
        json.dumps(
            {
                "dataclass_parse_us": round(dataclass_us, 1),
                "struct_parse_us": round(twin_us, 1),
                "msgspec_struct_convert_us": round(struct_us, 1),
                "ratio": round(dataclass_us / struct_us, 1),
            }
        )
    )


if __name__ == "__main__":
    main()

"""Bottlerocket's node bootstrap: the TOML settings its API server reads from user data.

Bottlerocket has no boot script: the user data is a TOML document of settings, and the
``[settings.kubernetes]`` table configures the kubelet (``api-server``, ``cluster-certificate``,
``cluster-name``, ``max-pods``, ``kube-reserved``, ``system-reserved``, ``eviction-hard``,
``node-labels``, ``node-taints``). The operator writes the same content as the AL2023
NodeConfig (:mod:`._nodeconfig`), merged with the node class's own TOML as Karpenter merges
it: the user's settings are kept, the operator's kubernetes settings replace theirs key by key,
node labels are merged (the operator's win) and node taints are the operator's alone.

Deterministic output (sorted keys), as the idempotency token requires.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping, Sequence
from datetime import date, datetime, time
from typing import Any

from ._nodeconfig import KubeletSettings, kubelet_may_set_label
from ._port import ClusterInfo


def bottlerocket_user_data(
    cluster: ClusterInfo,
    kubelet: KubeletSettings,
    *,
    labels: Mapping[str, str],
    taints: Sequence[Mapping[str, str]],
    user_data: str | None = None,
) -> str:
    """The TOML user data of a Bottlerocket node, ``user_data`` (the class's TOML) merged in.

    Raises:
        ValueError: ``user_data`` is not TOML, or its ``settings.kubernetes`` is no table.
    """
    try:
        doc: dict[str, Any] = tomllib.loads(user_data) if user_data and user_data.strip() else {}
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"Bottlerocket userData is not TOML: {err}") from err
    settings = doc.setdefault("settings", {})
    kubernetes = settings.setdefault("kubernetes", {}) if isinstance(settings, dict) else None
    if not isinstance(kubernetes, dict):
        raise ValueError("Bottlerocket userData: settings.kubernetes must be a table")
    own_labels = kubernetes.get("node-labels") or {}
    node_taints: dict[str, list[str]] = {}
    for taint in taints:
        value = taint.get("value") or ""
        node_taints.setdefault(taint["key"], []).append(f"{value}:{taint['effect']}")
    kubernetes.update(
        {
            "api-server": cluster.endpoint,
            "cluster-certificate": cluster.certificate_authority,
            "cluster-name": cluster.name,
            "max-pods": kubelet.max_pods,
            "kube-reserved": dict(kubelet.kube_reserved),
            "eviction-hard": dict(kubelet.eviction_hard),
            "node-labels": {
                **(own_labels if isinstance(own_labels, dict) else {}),
                **{k: v for k, v in labels.items() if kubelet_may_set_label(k)},
            },
            "node-taints": node_taints,
        }
    )
    if kubelet.system_reserved:
        kubernetes["system-reserved"] = dict(kubelet.system_reserved)
    return dumps(doc)


def dumps(doc: Mapping[str, Any]) -> str:
    """``doc`` as TOML: every key quoted, tables after their table's plain values, sorted.

    Raises:
        ValueError: an array of tables (Bottlerocket's settings have none).
    """
    lines: list[str] = []
    _table(doc, (), lines)
    return "\n".join(lines).strip("\n") + "\n"


def _table(table: Mapping[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    plain = {k: v for k, v in table.items() if not isinstance(v, Mapping)}
    nested = {k: v for k, v in table.items() if isinstance(v, Mapping)}
    if path and (plain or not nested):
        lines += ["", "[" + ".".join(_key(p) for p in path) + "]"]
    for key in sorted(plain):
        lines.append(f"{_key(key)} = {_value(plain[key])}")
    for key in sorted(nested):
        _table(nested[key], (*path, key), lines)


def _key(key: str) -> str:
    return json.dumps(key)


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list):
        if any(isinstance(v, Mapping) for v in value):
            raise ValueError("Bottlerocket userData: arrays of tables are not supported")
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise ValueError(f"Bottlerocket userData: cannot write a {type(value).__name__}")

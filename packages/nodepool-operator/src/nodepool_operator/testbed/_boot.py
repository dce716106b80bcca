"""What an EKS node's boot makes of its user data, for the moto kubelets.

On a real AL2023 instance nodeadm reads the user data (a NodeConfig, or the
``application/node.eks.aws`` parts of a MIME multi-part document, merged in order), writes the
kubelet's configuration and flags, and the kubelet registers the Node from them and from the
machine. On Bottlerocket the user data is TOML settings, whose ``[settings.kubernetes]``
configures the kubelet. This module reads the same user data the same way, so that the Node
the test bed registers depends on exactly what a real node's would: if the operator's user
data lost a label, the Node loses it too. It never reads any operator-private format.

Whether nodeadm itself takes the user data is checked by the real nodeadm in the tests
(``tests/_nodeadm.py``); this reading is only the stand-in kubelet's.
"""

from __future__ import annotations

import base64
import binascii
import email
import email.message
import email.policy
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import yaml

from nodepool_operator.scheduling import format_bytes, format_cpu, parse_bytes, parse_cpu

_MEDIA_TYPE: Final = "application/node.eks.aws"
#: The kubelet's own default when nothing sets maxPods.
KUBELET_MAX_PODS: Final = 110


@dataclass(frozen=True, slots=True, kw_only=True)
class KubeletBoot:
    """The kubelet's registration settings, as nodeadm would have configured them."""

    cluster_name: str
    labels: dict[str, str] = field(default_factory=dict)
    """From ``--node-labels`` (every occurrence, later values winning)."""
    taints: tuple[dict[str, str], ...] = ()
    """From ``--register-with-taints`` and the config's ``registerWithTaints``."""
    max_pods: int | None = None
    kube_reserved: dict[str, str] = field(default_factory=dict)
    system_reserved: dict[str, str] = field(default_factory=dict)
    eviction_hard: dict[str, str] = field(default_factory=dict)


def read_boot(user_data: str) -> KubeletBoot | None:
    """The kubelet settings in ``user_data`` (as EC2 returns it: text, maybe base64), or None
    when it holds no NodeConfig with a cluster (nodeadm would not join this instance)."""
    text = _decoded(user_data)
    configs = _node_configs(text)
    if not configs:
        return _bottlerocket(text)
    spec = _merge(configs)
    cluster = spec.get("cluster") or {}
    if not cluster.get("name"):
        return None
    kubelet = spec.get("kubelet") or {}
    config: Mapping[str, Any] = kubelet.get("config") or {}
    flags: Sequence[str] = kubelet.get("flags") or ()
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = [
        {k: str(v) for k, v in t.items() if k in ("key", "value", "effect")}
        for t in config.get("registerWithTaints") or ()
    ]
    max_pods = config.get("maxPods")
    for flag in flags:
        name, _, value = flag.partition("=")
        value = value.strip('"')
        if name == "--node-labels":
            labels.update(_pairs(value))
        elif name == "--register-with-taints":
            taints += [_taint(item) for item in value.split(",") if item]
        elif name == "--max-pods":
            max_pods = int(value)
    return KubeletBoot(
        cluster_name=str(cluster["name"]),
        labels=labels,
        taints=tuple(taints),
        max_pods=int(max_pods) if max_pods is not None else None,
        kube_reserved={k: str(v) for k, v in (config.get("kubeReserved") or {}).items()},
        system_reserved={k: str(v) for k, v in (config.get("systemReserved") or {}).items()},
        eviction_hard={k: str(v) for k, v in (config.get("evictionHard") or {}).items()},
    )


def _decoded(user_data: str) -> str:
    """EC2 hands user data back base64-encoded once; the document itself may be again."""
    text = user_data
    for _ in range(2):
        stripped = "".join(text.split())
        if not stripped or text.lstrip().startswith(("MIME-Version", "Content-Type", "apiVersion")):
            break
        try:
            text = base64.b64decode(stripped, validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            break
    return text


def _node_configs(text: str) -> list[dict[str, Any]]:
    if text.startswith(("MIME-Version:", "Content-Type:")):
        message = email.message_from_string(text, policy=email.policy.compat32)
        if not message.is_multipart():
            return []
        found = []
        for part in message.get_payload():
            if isinstance(part, email.message.Message) and part.get_content_type() == _MEDIA_TYPE:
                found += _documents(str(part.get_payload()))
        return found
    return _documents(text)


def _documents(text: str) -> list[dict[str, Any]]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    if isinstance(doc, dict) and doc.get("kind") == "NodeConfig":
        return [dict(doc.get("spec") or {})]
    return []


def _merge(specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """nodeadm's merge: later documents override, kubelet flags are appended, kubelet
    config is merged key by key."""
    out: dict[str, Any] = {}
    for spec in specs:
        for key, value in spec.items():
            if key == "kubelet":
                kubelet = out.setdefault("kubelet", {})
                kubelet["flags"] = [*(kubelet.get("flags") or ()), *(value.get("flags") or ())]
                kubelet["config"] = _deep(kubelet.get("config") or {}, value.get("config") or {})
            elif isinstance(value, Mapping):
                out[key] = _deep(out.get(key) or {}, value)
            else:
                out[key] = value
    return out


def _deep(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _deep(merged[key], value)
        else:
            merged[key] = value
    return merged


def _pairs(text: str) -> dict[str, str]:
    out = {}
    for item in text.split(","):
        if item:
            key, _, value = item.partition("=")
            out[key] = value
    return out


def _taint(item: str) -> dict[str, str]:
    head, _, effect = item.rpartition(":")
    key, sep, value = head.partition("=")
    taint = {"key": key, "effect": effect}
    if sep and value:
        taint["value"] = value
    return taint


def _bottlerocket(text: str) -> KubeletBoot | None:
    """Bottlerocket's ``[settings.kubernetes]``, or None when the text is no such TOML."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    kubernetes = (doc.get("settings") or {}).get("kubernetes")
    if not isinstance(kubernetes, dict) or not kubernetes.get("cluster-name"):
        return None
    taints = []
    for key, values in sorted((kubernetes.get("node-taints") or {}).items()):
        for item in values if isinstance(values, list) else [values]:
            value, _, effect = str(item).rpartition(":")
            taint = {"key": key, "effect": effect}
            if value:
                taint["value"] = value
            taints.append(taint)
    max_pods = kubernetes.get("max-pods")

    def strings(name: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in (kubernetes.get(name) or {}).items()}

    return KubeletBoot(
        cluster_name=str(kubernetes["cluster-name"]),
        labels=strings("node-labels"),
        taints=tuple(taints),
        max_pods=int(max_pods) if max_pods is not None else None,
        kube_reserved=strings("kube-reserved"),
        system_reserved=strings("system-reserved"),
        eviction_hard=strings("eviction-hard"),
    )


def kubelet_resources(
    boot: KubeletBoot, *, cpu_millis: int, memory: int, disk: int
) -> tuple[dict[str, str], dict[str, str]]:
    """Capacity and allocatable as the kubelet reports them for a machine of ``cpu_millis``,
    ``memory`` and root ``disk`` bytes: capacity minus kube-reserved, system-reserved and
    the hard eviction threshold (a quantity, or a percentage of capacity)."""
    reserved = (boot.kube_reserved, boot.system_reserved)
    reserved_cpu = sum(parse_cpu(r.get("cpu", "0")) for r in reserved)
    reserved_memory = sum(parse_bytes(r.get("memory", "0")) for r in reserved)
    reserved_disk = sum(parse_bytes(r.get("ephemeral-storage", "0")) for r in reserved)
    evict_memory = _threshold(boot.eviction_hard.get("memory.available"), memory)
    evict_disk = _threshold(boot.eviction_hard.get("nodefs.available"), disk)
    pods = str(boot.max_pods if boot.max_pods is not None else KUBELET_MAX_PODS)
    capacity = {
        "cpu": format_cpu(cpu_millis),
        "memory": format_bytes(memory),
        "ephemeral-storage": format_bytes(disk),
        "pods": pods,
    }
    allocatable = {
        "cpu": format_cpu(max(0, cpu_millis - reserved_cpu)),
        "memory": format_bytes(max(0, memory - reserved_memory - evict_memory)),
        "ephemeral-storage": format_bytes(max(0, disk - reserved_disk - evict_disk)),
        "pods": pods,
    }
    return capacity, allocatable


def _threshold(value: str | None, capacity: int) -> int:
    if not value:
        return 0
    if value.endswith("%"):
        return capacity * int(float(value[:-1]) * 100) // 10000
    return parse_bytes(value)

"""What the operator's writes cost, read from its metrics registry.

The figures come from the exposition text (``Registry.render()``), the same text ``/metrics``
serves, so the demo reports exactly what a Prometheus scrape of the operator would show and
relies on nothing private to the registry.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from kubeloop import Registry

WRITES = "kubeloop_api_writes_total"
CONFLICTS = "kubeloop_conflicts_total"
#: A conflict is either tried again or given up on; ``resolved`` counts the happy ending of a
#: series of conflicts, not another 409, so it is left out of the count.
_CONFLICT_OUTCOMES = frozenset({"retried", "gave_up"})

_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})? (?P<value>\S+)$")
_LABEL = re.compile(r'(?P<key>[a-zA-Z_][a-zA-Z0-9_]*)="(?P<value>(?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class ApiActivity:
    """Successful writes to the API server and 409 Conflicts met, by the operator's controllers.

    ``writes_by_controller`` keys are controller names; ``""`` is a write made outside any
    reconcile (CRD installation at start-up, the event recorder). ``writes_by_target`` keys
    are ``"<controller> <verb> <resource>[/<subresource>]"``, ``conflicts_by_target`` keys
    ``"<controller> <resource>"``.
    """

    writes: int = 0
    conflicts: int = 0
    writes_by_controller: dict[str, int] = field(default_factory=dict)
    writes_by_target: dict[str, int] = field(default_factory=dict)
    conflicts_by_target: dict[str, int] = field(default_factory=dict)

    def since(self, earlier: ApiActivity) -> ApiActivity:
        """What happened after ``earlier`` (counters only grow)."""
        return ApiActivity(
            writes=self.writes - earlier.writes,
            conflicts=self.conflicts - earlier.conflicts,
            writes_by_controller=_minus(self.writes_by_controller, earlier.writes_by_controller),
            writes_by_target=_minus(self.writes_by_target, earlier.writes_by_target),
            conflicts_by_target=_minus(self.conflicts_by_target, earlier.conflicts_by_target),
        )


def _minus(now: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: n - before.get(k, 0) for k, n in now.items() if n - before.get(k, 0)}


def api_activity(registry: Registry) -> ApiActivity:
    """Sum the write and conflict counters of ``registry`` as they stand now."""
    return parse_activity(registry.render())


def parse_activity(exposition: str) -> ApiActivity:
    """:func:`api_activity` from Prometheus text exposition format."""
    writes = 0.0
    conflicts = 0.0
    by_controller: dict[str, float] = {}
    by_target: dict[str, float] = {}
    conflicts_by_target: dict[str, float] = {}
    for name, labels, value in _samples(exposition):
        if name == WRITES:
            writes += value
            controller = labels.get("controller", "")
            by_controller[controller] = by_controller.get(controller, 0.0) + value
            target = _target(controller, labels)
            by_target[target] = by_target.get(target, 0.0) + value
        elif name == CONFLICTS and labels.get("outcome") in _CONFLICT_OUTCOMES:
            conflicts += value
            target = f"{labels.get('controller') or '-'} {labels.get('resource', '')}"
            conflicts_by_target[target] = conflicts_by_target.get(target, 0.0) + value
    return ApiActivity(
        writes=round(writes),
        conflicts=round(conflicts),
        writes_by_controller=_rounded(by_controller),
        writes_by_target=_rounded(by_target),
        conflicts_by_target=_rounded(conflicts_by_target),
    )


def _target(controller: str, labels: dict[str, str]) -> str:
    resource = labels.get("resource", "")
    if labels.get("subresource"):
        resource += "/" + labels["subresource"]
    return f"{controller or '-'} {labels.get('verb', '')} {resource}"


def _rounded(counts: dict[str, float]) -> dict[str, int]:
    return {k: round(v) for k, v in sorted(counts.items()) if v}


def _samples(exposition: str) -> Iterator[tuple[str, dict[str, str], float]]:
    for line in exposition.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        labels = {m["key"]: _unescape(m["value"]) for m in _LABEL.finditer(match["labels"] or "")}
        try:
            value = float(match["value"])
        except ValueError:
            continue
        yield match["name"], labels, value


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m[1] == "n" else m[1], value)

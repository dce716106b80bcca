"""Telling a controller that it is feeding itself.

The seeds' trap: a reconciler writes a field that changes every time (a
timestamp), the write produces an update event, the event triggers a reconcile,
which writes again. Nothing in the spec changed, so ``metadata.generation``
stands still while the object keeps being reconciled.

The detector knows which resourceVersions the controller's own writes produced.
An update event that carries one of them, with no generation change, is
self-triggered. A reconcile run only because of such events extends a streak;
any outside change ends it. At ``threshold`` the loop is reported once per
streak, naming the fields that kept changing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from kubeloop._event import Event, Generic, Updated
from kubeloop._predicate import changed_paths
from kubeloop._reconcile import Request
from kubeloop._resource import Object


@dataclass
class LoopDetectionOptions:
    """When to call it a loop."""

    #: Consecutive self-triggered reconciles of one object (default 5).
    threshold: int = 5
    #: Our own written resourceVersions remembered per object (default 8).
    remembered_writes: int = 8


@dataclass
class _Streak:
    count: int = 0
    reported: bool = False
    fields: list[str] = field(default_factory=list)
    obj: Object | None = None


#: Stands for events dropped from a long backlog; treated as an outside change.
_DROPPED = Generic({})

#: Called once per detected loop: (request, the object, the fields that keep changing).
OnLoop = Callable[[Request, Object, list[str]], None]


class LoopDetector:
    def __init__(self, options: LoopDetectionOptions, on_loop: OnLoop) -> None:
        self.options = options
        self.on_loop = on_loop
        self._own: dict[Request, OrderedDict[str, None]] = {}
        self._pending: dict[Request, list[Event | None]] = {}
        self._streaks: dict[Request, _Streak] = {}

    def own_write(self, req: Request, resource_version: str) -> None:
        """Record a resourceVersion that one of our writes produced."""
        seen = self._own.setdefault(req, OrderedDict())
        seen[resource_version] = None
        while len(seen) > self.options.remembered_writes:
            seen.popitem(last=False)

    def is_self_triggered(self, req: Request, event: Event | None) -> bool:
        if not isinstance(event, Updated):
            return False
        new_meta, old_meta = event.new["metadata"], event.old["metadata"]
        if new_meta.get("generation") != old_meta.get("generation"):
            return False
        return new_meta.get("resourceVersion") in self._own.get(req, ())

    def enqueued(self, req: Request, event: Event | None) -> None:
        """Note why ``req`` was enqueued (an event, or None for a timer).

        Classification waits until the reconcile starts: by then the write that
        produced a self-triggered event has certainly been recorded, even when the
        watch delivered the event before the writer saw the response.
        """
        pending = self._pending.setdefault(req, [])
        pending.append(event)
        if len(pending) > self.options.remembered_writes:
            # many events between two reconciles: keep the newest, and remember that
            # something older (possibly external) was dropped
            del pending[: len(pending) - self.options.remembered_writes]
            pending.insert(0, _DROPPED)

    def starting(self, req: Request) -> bool:
        """Called when a reconcile of ``req`` starts; True if it is self-triggered."""
        events = self._pending.pop(req, [])
        self_event: Updated | None = None
        for event in events:
            if event is None:
                continue  # timers neither extend nor end a streak
            if isinstance(event, Updated) and self.is_self_triggered(req, event):
                self_event = event
                continue
            self._streaks.pop(req, None)  # an outside change ends the streak
            return False
        if self_event is None:
            return False
        streak = self._streaks.setdefault(req, _Streak())
        streak.count += 1
        streak.fields = changed_paths(self_event.old, self_event.new) or streak.fields
        streak.obj = self_event.new
        if streak.count >= self.options.threshold and not streak.reported:
            streak.reported = True
            self.on_loop(req, streak.obj or {}, streak.fields)
        return True

    def forget(self, req: Request) -> None:
        self._own.pop(req, None)
        self._pending.pop(req, None)
        self._streaks.pop(req, None)

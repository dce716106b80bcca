"""The image each node class resolves to now, for drift (:mod:`._drift`): asked of the cloud
once per image and period (Karpenter resolves its AMIs every 5 minutes), and at once when
the class changes, never once per node or per pass. Shared by every pool (pools naming one
class, or one parameter, cost one call).

A launch resolves the image itself (``resolve:ssm:`` at RunInstances), so a VM launched
after the last resolution may already run a newer image than the one remembered here: each
VM seen launched from an image is an answer about that image as of its launch, and the
newest answer wins. Without that, a node launched between the parameter's move and the
next resolution would look drifted (newer than what is remembered) and be replaced for
nothing.

In memory: after a restart the first pass of each pool resolves its image again (one call
per image); the Nodes' drift marks are read back from the cluster meanwhile.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from nodepool_operator.cloud import CloudError, CloudProvider, Instance

__all__ = ["ImageResolver"]

log = logging.getLogger("nodepool_operator.nodepool")


@dataclass(frozen=True, slots=True)
class _Answer:
    image_id: str | None
    """None: never resolved (the cloud refused so far)."""
    at: float
    """When it was true (asked, or the launch of the VM that showed it)."""
    asked: float
    """When the cloud was last asked (an answer from a VM does not count)."""
    version: str
    """The node class's version when asked (an edit asks again)."""


class ImageResolver:
    """What each image resolves to now; see the module docstring."""

    def __init__(
        self, cloud: CloudProvider, period: float, clock: Callable[[], float] = time.time
    ) -> None:
        self._cloud = cloud
        self._period = period
        self._clock = clock
        self._answers: dict[str, _Answer] = {}

    def seen(self, image: str, vms: Iterable[Instance]) -> None:
        """Learn from VMs launched from ``image`` what it resolved to at their launch."""
        for vm in vms:
            answer = self._answers.get(image)
            if vm.image != image or not vm.image_id or answer is None or vm.created_at <= answer.at:
                continue
            self._answers[image] = _Answer(vm.image_id, vm.created_at, answer.asked, answer.version)

    async def current(self, image: str, version: str) -> str | None:
        """What ``image`` resolves to now: asked again once its answer is a period old or
        the class (``version``) changed; the last answer while the cloud refuses (None when
        there was none). Never raises a cloud error: drift waits, launches are unaffected."""
        answer = self._answers.get(image)
        now = self._clock()
        if answer is not None and answer.version == version and now - answer.asked < self._period:
            return answer.image_id
        known = answer.image_id if answer is not None else None
        try:
            resolved: str | None = await self._cloud.resolve_image(image)
        except CloudError as err:
            log.warning("image not resolved", extra={"image": image, "error": str(err)})
            resolved = known  # asked again after a period, or when the class changes
        self._answers[image] = _Answer(resolved, now, now, version)
        return resolved

    def remaining(self, image: str) -> float | None:
        """Seconds until ``image`` is asked again (None: not asked yet)."""
        answer = self._answers.get(image)
        if answer is None:
            return None
        return max(0.0, answer.asked + self._period - self._clock())

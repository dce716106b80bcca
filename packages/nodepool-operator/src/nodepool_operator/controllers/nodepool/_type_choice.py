"""Which instance type a pool's next VM is launched as: the cheapest available type, among
the pool's ``instanceType`` and its ``instanceTypes`` fallbacks, that fits the pool's
template.

``instanceType`` stays the node the Autoscaler's template is made of, so a fallback is only
launched when it holds at least what that template promises (CPU, memory, pods, GPUs, the
same architecture): every plan made on the template still holds on the node that comes.
Price decides among those that fit (a table, no live pricing API); the spec's order breaks
ties and ranks a type of unknown price after every priced one. A type the cloud said is out
(:mod:`._offerings`) is skipped while another fits; when every one is out the cheapest is
asked anyway (the create gate spaces those calls), so the cache never stalls a pool alone.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from nodepool_operator.scheduling import Resources


@dataclass(frozen=True, slots=True)
class TypeOption:
    """One of a pool's types as a node of the pool would be: what its kubelet offers."""

    name: str
    allocatable: Resources
    """The pool's Node of this type's allocatable (its node class's reservations applied)."""
    architecture: str = "amd64"


def fits(candidate: TypeOption, template: TypeOption) -> bool:
    """Whether a node of ``candidate`` holds all a node of ``template`` holds."""
    return candidate.architecture == template.architecture and template.allocatable.fits_in(
        candidate.allocatable
    )


def candidates(primary: str, fallbacks: Sequence[str]) -> list[str]:
    """The pool's types in order of preference, each once."""
    return list(dict.fromkeys([primary, *fallbacks]))


def choose_type(
    template: TypeOption,
    preferred: Sequence[TypeOption],
    prices: Mapping[str, float],
    unavailable: Callable[[str], bool],
) -> TypeOption:
    """The type to launch: ``preferred`` is the pool's types in the spec's order (the
    template's type among them); one that does not fit the template is never chosen."""
    fitting = [t for t in preferred if t.name == template.name or fits(t, template)]
    if not fitting:
        return template
    available = [t for t in fitting if not unavailable(t.name)] or fitting
    order = {t.name: i for i, t in enumerate(fitting)}

    def cost(t: TypeOption) -> tuple[bool, float, int]:
        price = prices.get(t.name)
        return (price is None, price or 0.0, order[t.name])

    return min(available, key=cost)

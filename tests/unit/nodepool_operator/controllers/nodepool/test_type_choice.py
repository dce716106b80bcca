"""A pool's VM is the cheapest available of its types that holds what its template does."""

from __future__ import annotations

import pytest

from nodepool_operator.controllers.nodepool._type_choice import (
    TypeOption,
    candidates,
    choose_type,
    fits,
)
from nodepool_operator.scheduling import Resources

GiB = 1024**3


def option(name: str, cpu: int, mem_gib: int, pods: int = 29, arch: str = "amd64") -> TypeOption:
    return TypeOption(name, Resources(cpu=cpu, memory=mem_gib * GiB, pods=pods), arch)


M5 = option("m5.large", 1930, 7)
C5X = option("c5.xlarge", 3920, 7, pods=58)
R5 = option("r5.large", 1930, 15)
C5 = option("c5.large", 1930, 3)  # less memory: never a stand-in for m5.large
M6G = option("m6g.large", 1930, 7, arch="arm64")
UNPRICED = option("x9.large", 4000, 16, pods=100)
PRICES = {"m5.large": 0.096, "c5.xlarge": 0.17, "r5.large": 0.126, "c5.large": 0.085}


@pytest.mark.parametrize(
    ("preferred", "out", "chosen"),
    [
        ([M5], set(), "m5.large"),
        ([M5, C5X, R5], set(), "m5.large"),  # cheapest
        ([M5, C5X, R5], {"m5.large"}, "r5.large"),  # cheapest available, not the next listed
        ([M5, C5X, R5], {"m5.large", "r5.large"}, "c5.xlarge"),
        ([M5, C5, R5], {"m5.large"}, "r5.large"),  # c5.large is cheaper but does not fit
        ([M5, M6G, R5], {"m5.large"}, "r5.large"),  # another architecture does not fit
        ([M5, UNPRICED], {"m5.large"}, "x9.large"),  # unknown price: still a fallback
        ([M5, UNPRICED, C5X], {"m5.large"}, "c5.xlarge"),  # but after every priced one
        ([M5, C5X, R5], {"m5.large", "c5.xlarge", "r5.large"}, "m5.large"),  # all out: cheapest
        ([M5, C5], {"m5.large"}, "m5.large"),  # nothing else fits: the template's own
    ],
)
def test_choose_type(preferred: list[TypeOption], out: set[str], chosen: str) -> None:
    assert choose_type(M5, preferred, PRICES, out.__contains__).name == chosen


def test_spec_order_breaks_price_ties() -> None:
    same = option("m5a.large", 1930, 7)
    prices = {"m5.large": 0.096, "m5a.large": 0.096}
    assert choose_type(M5, [M5, same], prices, set().__contains__).name == "m5.large"
    assert choose_type(M5, [same, M5], prices, set().__contains__).name == "m5a.large"


def test_fits_compares_every_resource_and_the_architecture() -> None:
    assert fits(C5X, M5)
    assert not fits(M5, C5X)
    assert not fits(option("m5.large", 1930, 7, pods=20), M5), "fewer pods do not fit"
    assert not fits(M6G, M5)


def test_candidates_keep_the_spec_order_once_each() -> None:
    assert candidates("m5.large", ["c5.xlarge", "m5.large", "r5.large"]) == [
        "m5.large",
        "c5.xlarge",
        "r5.large",
    ]

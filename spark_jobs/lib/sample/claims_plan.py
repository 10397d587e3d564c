"""Language-independent claim structure of an invention: numbers, kinds, dependencies."""

from __future__ import annotations

import random
from dataclasses import dataclass

from spark_jobs.lib.sample.plan import Feature, Invention, Parameter


@dataclass(frozen=True)
class ClaimSpec:
    number: int
    parents: tuple[int, ...]  # empty: independent claim
    style: str  # single | or | range   (how the parents are written)
    kind: str  # device | feature | parameter | purpose | method
    feature: Feature | None = None
    parameter: Parameter | None = None

    @property
    def independent(self) -> bool:
        return not self.parents


def _parents(n: int, r: random.Random) -> tuple[tuple[int, ...], str]:
    roll = r.random()
    if n >= 3 and roll < 0.1:
        return (n - 2, n - 1), "or"
    if n >= 3 and roll < 0.2:
        return tuple(range(1, n)), "range"
    if n >= 3 and roll < 0.4:
        return (n - 1,), "single"
    return (1,), "single"


def claim_plan(inv: Invention, r: random.Random) -> list[ClaimSpec]:
    """Claim 1 holds the distinguishing combination; dependents refine it; maybe a method."""
    claims = [ClaimSpec(1, (), "single", "device")]
    for feature in inv.extras:
        parents, style = _parents(len(claims) + 1, r)
        claims.append(ClaimSpec(len(claims) + 1, parents, style, "feature", feature=feature))
    for parameter in inv.parameters:
        parents, style = _parents(len(claims) + 1, r)
        claims.append(ClaimSpec(len(claims) + 1, parents, style, "parameter", parameter=parameter))
    n = len(claims) + 1
    claims.append(ClaimSpec(n, tuple(range(1, n)), "range", "purpose"))
    if inv.method_steps:
        claims.append(ClaimSpec(len(claims) + 1, (), "single", "method"))
    return claims

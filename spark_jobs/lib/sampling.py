"""Seeded, deterministic sampling: the same seed and keys give the same choice on any cluster."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

_PRIME = 2_147_483_647  # hash -> [0, 1) bucket modulus


def uniform(seed: int, *columns: str, draw: str | None = None) -> Column:
    """A deterministic pseudo-random number in [0, 1) from the seed and the row's keys.

    ``draw`` names one draw of several over the same keys: a second selection by the same
    number would keep exactly the rows the first kept least of (the smallest numbers)."""
    salt = [F.lit(draw)] if draw else []
    keys = [F.col(c) for c in columns]
    return F.pmod(F.xxhash64(F.lit(seed), *salt, *keys), F.lit(_PRIME)) / F.lit(float(_PRIME))

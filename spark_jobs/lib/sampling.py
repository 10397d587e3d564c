"""Seeded, deterministic sampling: the same seed and keys give the same choice on any cluster."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

_PRIME = 2_147_483_647  # hash -> [0, 1) bucket modulus


def uniform(seed: int, *columns: str) -> Column:
    """A deterministic pseudo-random number in [0, 1) from the seed and the row's keys."""
    return F.pmod(F.xxhash64(F.lit(seed), *[F.col(c) for c in columns]), F.lit(_PRIME)) / F.lit(
        float(_PRIME)
    )

"""Where a Spark job's time goes: wall seconds of every action, by the repository line that
called it.

Each DataFrame action (count, collect, isEmpty, first, take, toPandas), write (save,
parquet), read (load), SQL statement (the lake layer's Delta calls: CREATE TABLE, DESCRIBE
HISTORY, RESTORE) and createDataFrame is timed; an action called inside another is part of the outer one. The
call site is the innermost frame in this repository's packages, so a job's time splits into
its own lines and the lake layer's (reads, writes, run log).

    with ActionTimer() as timer:
        build_pairs.run(spark, lake)
    timer.top(10)  # [{"site": "spark_jobs/build_pairs.py:80 ...", "calls": 1, "seconds": 13.5}, ...]
"""

from __future__ import annotations

import functools
import inspect
import time
import traceback
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("spark_jobs", "lake", "retrieval", "trainer", "evaluation", "expectations")


def _targets():
    from pyspark.sql import DataFrameReader, DataFrameWriter, SparkSession
    from pyspark.sql.classic.dataframe import DataFrame

    return [
        (DataFrame, ("count", "collect", "isEmpty", "first", "take", "toPandas")),
        (DataFrameWriter, ("save", "parquet")),
        (DataFrameReader, ("load",)),
        (SparkSession, ("createDataFrame", "sql")),
    ]


def _call_site() -> str:
    for frame in reversed(traceback.extract_stack()[:-2]):  # not this function, not timed()
        path = Path(frame.filename).resolve()
        if path.is_relative_to(ROOT) and path.relative_to(ROOT).parts[0] in PACKAGES:
            return f"{path.relative_to(ROOT)}:{frame.lineno} {(frame.line or '').strip()[:60]}"
    return "(outside the packages)"


class ActionTimer:
    """Context manager: times every action while it is open (see the module docstring)."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._saved: list[tuple[type, str, object]] = []
        self._depth = 0

    def _wrap(self, owner: type, name: str) -> None:
        original = inspect.getattr_static(owner, name)  # may live on a base class
        descriptor = isinstance(original, (classmethod, staticmethod))
        function = original.__func__ if descriptor else original

        @functools.wraps(function)
        def timed(*args, **kwargs):
            if self._depth:
                return function(*args, **kwargs)
            site = f"{name} at {_call_site()}"
            self._depth += 1
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                self._depth -= 1
                self.seconds[site] += time.perf_counter() - start
                self.calls[site] += 1

        wrapped = type(original)(timed) if descriptor else timed  # classmethod stays one
        self._saved.append((owner, name, original if name in owner.__dict__ else None))
        setattr(owner, name, wrapped)

    def __enter__(self) -> ActionTimer:
        for owner, names in _targets():
            for name in names:
                self._wrap(owner, name)
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, original in reversed(self._saved):
            if original is None:
                delattr(owner, name)  # the base class's method shows through again
            else:
                setattr(owner, name, original)
        self._saved.clear()

    def total(self) -> float:
        return round(sum(self.seconds.values()), 2)

    def top(self, n: int = 12) -> list[dict]:
        """The ``n`` call sites with the most seconds, most first."""
        ranked = sorted(self.seconds, key=self.seconds.get, reverse=True)[:n]
        return [
            {"site": s, "calls": self.calls[s], "seconds": round(self.seconds[s], 2)}
            for s in ranked
        ]

    def print(self, label: str, wall: float, n: int = 12) -> None:
        print(f"{label}: {self.total():.1f}s of {wall:.1f}s in actions; the most:", flush=True)
        for row in self.top(n):
            print(f"  {row['seconds']:7.2f}s {row['calls']:4d}x  {row['site']}", flush=True)

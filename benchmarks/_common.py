"""Shared pieces of the benchmark scripts: machine facts, result files, lake preparation."""

from __future__ import annotations

import json
import os
import platform
import shutil
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def machine(master: str | None = None) -> dict:
    facts = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    return {**facts, "spark_master": master} if master else facts


def size_bytes(path: Path) -> int:
    return sum(
        p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")
    )


def empty_folder(path: str | Path) -> Path:
    """``path`` as a new empty folder (what a previous run left there removed)."""
    folder = Path(path)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder


def best_of(repeats: int, fn) -> float:
    """The fastest of ``repeats`` timed calls (seconds): short timings are noisy."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


@contextmanager
def timed(label: str, into: dict):
    start = time.perf_counter()
    yield
    into[label] = round(time.perf_counter() - start, 2)
    print(f"{label}: {into[label]:.1f}s", flush=True)


def prepare_lake(
    spark, work: Path, patents: int, seed: int, seconds: dict | None = None, split: bool = True
) -> dict:
    """generate -> ingest -> curate (-> split at 2025-01-01) into work/sample and work/lake;
    each step's seconds go into `seconds` when given. Returns each step's metrics."""
    from datetime import date

    from spark_jobs import curate, ingest
    from spark_jobs import split as split_job
    from spark_jobs.lib.sample.generate import generate

    sample, lake = str(work / "sample"), str(work / "lake")
    steps = {
        "generate": lambda: generate(spark, sample, patents, seed, 0.02),
        "ingest": lambda: ingest.run(spark, lake, sample, "google_patents"),
        "curate": lambda: curate.run(spark, lake),
    }
    if split:
        steps["split"] = lambda: split_job.run(spark, lake, date(2025, 1, 1))
    metrics = {}
    for name, step in steps.items():
        if seconds is None:
            metrics[name] = step()
        else:
            with timed(name, seconds):
                metrics[name] = step()
    return metrics


def write_result(name: str, result: dict, out: str | None = None) -> Path:
    result = {
        "benchmark": name,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        **result,
    }
    path = Path(out) if out else RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return path

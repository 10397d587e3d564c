"""Consistent snapshots: what a reader sees of a table is what *successful* runs published.

Every commit a job makes carries its run id in Delta's ``userMetadata`` (``xembed-run:<id>``),
and the run is recorded in ``meta/job_runs`` only when it ends. A version written by a run
that has no ``succeeded`` row (it failed, was killed, or is still running) is invisible: the
reader takes the newest version below it that a successful run (or a writer outside the
job framework, whose commits carry no tag) made. A job that writes several tables thus
publishes them as one unit, at the moment its run row is appended; a rerun repairs.

``check_consistent`` refuses a mixed lake: inputs that the run log's lineage pins to other
versions than the ones a job is about to read (changed by hand, restored, or an upstream job
rerun without the jobs after it).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from lake.tables import commits, table_exists, table_path

RUN_TAG = "xembed-run:"


class MixedLakeError(RuntimeError):
    """Inputs that belong together come from different runs."""


@dataclass(frozen=True)
class Run:
    run_id: str
    job: str
    outputs: dict[str, int]
    inputs: dict[str, int]


@dataclass(frozen=True)
class Snapshot:
    """The version of a table a reader sees, who made it, and what it skipped."""

    name: str
    version: int
    run_id: str | None  # None: committed outside any job run (e.g. restored by hand)
    hidden: tuple[int, ...] = ()  # newer versions of runs that did not succeed


def tag(run_id: str) -> str:
    return RUN_TAG + run_id


def run_of(metadata: str | None) -> str | None:
    """The run id a commit's ``userMetadata`` tags (:func:`tag`), or None when untagged."""
    return metadata[len(RUN_TAG) :] if metadata and metadata.startswith(RUN_TAG) else None


def succeeded_runs(spark: SparkSession, lake: str) -> dict[str, Run]:
    """Every run recorded as succeeded in ``meta/job_runs``, by run id."""
    path = table_path(lake, "meta/job_runs")
    if not table_exists(spark, path):
        return {}
    rows = (
        spark.read.format("delta")
        .load(path)
        .where(F.col("status") == "succeeded")
        .select("run_id", "job", "outputs", "inputs")
        .collect()
    )
    return {
        r["run_id"]: Run(r["run_id"], r["job"], dict(r["outputs"] or {}), dict(r["inputs"] or {}))
        for r in rows
    }


def failed_runs(spark: SparkSession, lake: str) -> set[str]:
    """The ids of the runs recorded as failed in ``meta/job_runs``."""
    path = table_path(lake, "meta/job_runs")
    if not table_exists(spark, path):
        return set()
    rows = spark.read.format("delta").load(path).where(F.col("status") == "failed")
    return {r["run_id"] for r in rows.select("run_id").collect()}


def failed_head(spark: SparkSession, path: str, failed: set[str]) -> tuple[int, list[int]]:
    """(the newest version not committed by a failed run, the newer versions that were);
    the list is empty when the newest commit is no failed run's."""
    skipped = []
    for version, metadata in commits(spark, path):
        run_id = run_of(metadata)
        if run_id is None or run_id not in failed:
            return version, skipped
        skipped.append(version)
    return -1, skipped


def visible(spark: SparkSession, lake: str, name: str, runs: dict[str, Run]) -> Snapshot:
    """The newest version of ``name`` that a successful run (or an untagged writer) made."""
    path = table_path(lake, name)
    hidden: list[int] = []
    for version, metadata in commits(spark, path):
        run_id = run_of(metadata)
        if run_id is not None and run_id not in runs:
            hidden.append(version)
            continue
        return Snapshot(name, version, run_id, tuple(hidden))
    if not hidden:  # no commit at all: a lake path with a typo, or the writer never ran
        raise FileNotFoundError(
            f"table {name} does not exist at {path}; run the job that writes it first"
        )
    raise FileNotFoundError(
        f"table {name} at {path} holds only versions of runs that did not succeed "
        f"({', '.join(map(str, sorted(hidden)))}); rerun the job that writes it"
    )


def visible_snapshots(spark: SparkSession, lake: str, names) -> dict[str, Snapshot]:
    """The visible snapshot of each table in ``names`` (for readers outside a ``JobRun``)."""
    runs = succeeded_runs(spark, lake)
    return {name: visible(spark, lake, name, runs) for name in names}


def stale_inputs(spark: SparkSession, lake: str, manifest: dict) -> str | None:
    """What changed since a folder outside the lake was prepared from it, or None.

    ``manifest`` holds the ``delta_versions`` read and (since they were recorded) the
    ``delta_runs`` that wrote them: two lakes built by the same pipeline have the same version
    numbers, not the same runs."""
    versions = manifest.get("delta_versions") or {}
    current = visible_snapshots(spark, lake, versions)
    runs = manifest.get("delta_runs", {})  # absent from folders prepared before it was recorded

    def made(version: int, run: str | None) -> str:
        return f"v{version}" + (f" of run {run}" if run else "")

    changed = []
    for name, version in sorted(versions.items()):
        was = (version, runs.get(name))
        now = (current[name].version, current[name].run_id if name in runs else None)
        if was != now:
            changed.append(f"{name} {made(*was)} (lake: {made(*now)})")
    return ", ".join(changed) or None


def visible_versions(spark: SparkSession, lake: str, names) -> dict[str, int]:
    """The visible version of each table in ``names``."""
    return {name: s.version for name, s in visible_snapshots(spark, lake, names).items()}


def check_consistent(snapshots: list[Snapshot], runs: dict[str, Run], reader: str) -> None:
    """Refuse inputs from a mixed lake.

    From each input's run, follow the lineage the run log records (what each run wrote and
    read, and which run wrote those versions): every input the lineage pins to a version
    must be at that version. So ``split`` refuses ``silver/patents`` curated from one ingest
    beside ``bronze/citations`` of another, and ``curate`` refuses publications of one
    ingest beside citations restored by hand. Tables written by several jobs
    (``quarantine``) carry no lineage and are not compared.
    """
    writers: dict[str, set[str]] = {}
    producer: dict[tuple[str, int], Run] = {}
    for run in runs.values():
        for name, version in run.outputs.items():
            writers.setdefault(name, set()).add(run.job)
            producer[(name, int(version))] = run
    shared = {name for name, jobs in writers.items() if len(jobs) > 1}
    by_name = {s.name: s for s in snapshots if s.name not in shared}

    pending = [runs[s.run_id] for s in snapshots if s.run_id in runs]
    visited: set[str] = set()
    while pending:
        run = pending.pop()
        if run.run_id in visited:
            continue
        visited.add(run.run_id)
        for how, tables in (("wrote", run.outputs), ("read", run.inputs)):
            for name, version in tables.items():
                if how == "read" and name in run.outputs:
                    continue  # read, then rewritten by the run (a partition replaced)
                seen = by_name.get(name)
                if seen is not None and seen.version != int(version):
                    origin = f"run {seen.run_id}" if seen.run_id else "a commit outside any job run"
                    raise MixedLakeError(
                        f"{reader}: mixed lake: {run.job} run {run.run_id} {how} {name} as "
                        f"version {version}, but {name} is now version {seen.version} (from "
                        f"{origin}); rerun {run.job} (and what follows it) so the tables match"
                    )
                upstream = producer.get((name, int(version)))
                if how == "read" and upstream is not None:
                    pending.append(upstream)

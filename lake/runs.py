"""The record of one job run: pinned reads, contract writes, counters, ``meta/job_runs``.

Every job opens a ``JobRun``: it reads each table at the version successful runs published
(``lake.snapshots``: versions of failed, killed or unfinished runs are skipped, a mixed lake
is refused), writes through the table contract (schema enforcement, idempotent overwrite or
partition replace) with its run id in each commit, counts its steps and, at the end, appends
one row to ``meta/job_runs`` with the Delta versions it read and wrote and its counters;
that row publishes its writes.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from lake import fs
from lake.snapshots import (
    MixedLakeError,
    Run,
    Snapshot,
    check_consistent,
    failed_head,
    failed_runs,
    run_of,
    succeeded_runs,
    tag,
    visible,
)
from lake.tables import (
    commit_info,
    commit_metadata,
    commit_versions,
    conform,
    ensure_table,
    read_table,
    retry_conflicts,
    table_exists,
    table_path,
    write_table,
)
from schemas import table


class EmptyTableError(RuntimeError):
    """A job would replace a table with nothing, or read an empty input (see --allow-empty)."""


class NoLakeError(FileNotFoundError):
    """A job read an input where no lake folder is (a mistyped ``--lake``, most likely)."""


class JobRun:
    """Context of one job run: pinned reads, contract writes, counters, run log row."""

    def __init__(
        self,
        spark: SparkSession,
        lake: str,
        job: str,
        args: dict | None = None,
        run_id: str | None = None,
        allow_empty: bool | None = None,
    ):
        self.spark = spark
        self.lake = lake
        self.job = job
        self.args = args or {}
        self.run_id = run_id or f"{job}-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        self._given_id = run_id is not None  # a generated id is new; a caller's is checked
        self.inputs: dict[str, int] = {}
        self.outputs: dict[str, int] = {}
        self.metrics: dict[str, int] = {}
        self.rows_written: dict[str, int] = {}  # by table: the rows this run's commit added
        self.snapshots: dict[str, Snapshot] = {}
        self._runs: dict[str, Run] | None = None  # succeeded runs, read once at the first read
        self.started_at = datetime.now(UTC)
        # an empty input or output is an error unless the caller says it is meant
        self.allow_empty = (
            bool(self.args.get("allow_empty")) if allow_empty is None else allow_empty
        )

    # -- I/O ------------------------------------------------------------------------------
    def _visible(self, name: str) -> Snapshot:
        """The version of ``name`` readers see (:func:`lake.snapshots.visible`), against the
        run log's succeeded runs read once per run."""
        if self._runs is None:
            self._runs = succeeded_runs(self.spark, self.lake)
        return visible(self.spark, self.lake, name, self._runs)

    def published_version(self, name: str) -> int | None:
        """The version of ``name`` readers see now (the newest a successful run or an untagged
        writer made), None when there is none."""
        if not table_exists(self.spark, table_path(self.lake, name)):
            return None
        try:
            return self._visible(name).version
        except FileNotFoundError:  # only versions of runs that did not succeed
            return None

    def read(self, name: str) -> DataFrame:
        """Read table ``name`` at the version successful runs published and record it as an
        input; refuse it when it is empty or does not match the other inputs' runs.

        Reading back a table this run wrote pins the written version and is not an input; a
        second read of an input returns the version of the first, so one run never mixes two.
        """
        if name in self.outputs:
            return read_table(self.spark, self.lake, name, self.outputs[name])
        if name in self.inputs:  # read before in this run: the same version, checks done
            return read_table(self.spark, self.lake, name, self.inputs[name])
        path = table_path(self.lake, name)
        if not table_exists(self.spark, path):
            if no_lake := fs.no_lake_folder(self.lake):
                raise NoLakeError(f"{self.job}: input table {name}: {no_lake}")
            raise FileNotFoundError(
                f"{self.job}: input table {name} does not exist at {path}; "
                "run the job that writes it first"
            )
        snapshot = self._visible(name)
        if snapshot.hidden:
            self.info(
                f"{name}: skipping version(s) {', '.join(map(str, sorted(snapshot.hidden)))} "
                f"(runs that failed, were killed or are still running); reading version "
                f"{snapshot.version}"
            )
        self.snapshots[name] = snapshot
        check_consistent(list(self.snapshots.values()), self._runs, self.job)
        version = snapshot.version
        frame = read_table(self.spark, self.lake, name, version)
        self.inputs[name] = version
        if not (self.allow_empty or table(name).may_be_empty) and frame.isEmpty():
            raise EmptyTableError(
                f"{self.job}: input table {name} is empty (version {version}); "
                "refusing to build on it (pass --allow-empty if that is meant)"
            )
        return frame

    def producer_args(self, name: str) -> dict:
        """The arguments of the successful run that wrote the version of input ``name`` this
        run reads ({} when that version was committed outside any job run)."""
        self.read(name)
        snapshot = self.snapshots.get(name)
        if snapshot is None or snapshot.run_id is None:
            return {}
        rows = (
            read_table(self.spark, self.lake, "meta/job_runs")
            .where(F.col("run_id") == snapshot.run_id)
            .select("args_json")
            .collect()
        )
        return json.loads(rows[0]["args_json"] or "{}") if rows else {}

    def write(self, df: DataFrame, name: str, replace_where: str | None = None) -> int:
        """Write ``name`` through its contract; an empty result is refused before any commit
        unless the table may be empty or the run allows it (``--allow-empty``)."""
        checked = not (self.allow_empty or table(name).may_be_empty)
        # The check runs the plan through its shuffles; kept, the rows it computed are what the
        # write stores, instead of computing them a second time (a caller's own cache stays).
        kept = checked and df.storageLevel == StorageLevel.NONE
        if kept:
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if checked and df.isEmpty():
                raise EmptyTableError(
                    f"{self.job}: {name} would be empty; nothing was written"
                    + (
                        f" (the earlier outputs {sorted(self.outputs)} were)"
                        if self.outputs
                        else ""
                    )
                    + ". Check the input, or pass --allow-empty if an empty table is meant"
                )
            rebuilt = self._over_failed_head(df, name, replace_where) if replace_where else None
            version = write_table(
                self.spark,
                df if rebuilt is None else rebuilt,
                self.lake,
                name,
                replace_where if rebuilt is None else None,
                user_metadata=tag(self.run_id),
            )
        finally:
            if kept:
                df.unpersist()
        self.outputs[name] = version
        self.rows_written[name] = self._rows_committed(
            name, version, replace_where, whole=rebuilt is not None
        )
        self.info(f"wrote {name} (version {version}, {self.rows_written[name]:,} rows)")
        return version

    def check_partition(self, name: str, job: str, matches, what: str, rerun: str) -> None:
        """Refuse the partition of input ``name`` that the last successful ``job`` run whose
        arguments ``matches`` wrote, when that run read other versions of its inputs than
        the lake holds now.

        The lineage :meth:`read` checks follows the run that wrote the table's version; a
        table whose partitions other runs replace (gold/stage1_pairs, one per recipe) keeps
        partitions of earlier runs that it does not see: one built before curate or split
        ran again passed for current. ``rerun``: the command that rebuilds the partition."""
        version = self.inputs[name]
        rows = (
            read_table(self.spark, self.lake, "meta/job_runs")
            .where((F.col("job") == job) & (F.col("status") == "succeeded"))
            .select("run_id", "args_json", "inputs", "outputs")
            .collect()
        )
        built = [
            r
            for r in rows
            if (r["outputs"] or {}).get(name, version + 1) <= version
            and matches(json.loads(r["args_json"] or "{}"))
        ]
        if not built:
            return
        run = max(built, key=lambda r: r["outputs"][name])
        read = {t: v for t, v in (run["inputs"] or {}).items() if t != name}
        stale = [
            f"{t} v{v} (the lake's: v{now})"
            for t, v in sorted(read.items())
            for now in [self._visible(t).version]
            if now != v
        ]
        if stale:
            raise MixedLakeError(
                f"{self.job}: {what} were built by {job} run {run['run_id']} from "
                f"{', '.join(stale)}; rebuild them so they match the lake: {rerun}"
            )

    def written(self, name: str) -> int:
        """The rows this run wrote to ``name`` (of its partition, for a partition replace)."""
        return self.rows_written[name]

    def _over_failed_head(self, df: DataFrame, name: str, replace_where: str) -> DataFrame | None:
        """The whole table to write instead of a partition replace on a table whose newest
        commits are failed runs' (None when they are not).

        A Delta version is the whole table and a reader hides only the failed commits
        themselves: a partition replaced on top of them would publish the failed runs' other
        partitions (and hide what the last good run wrote there). The rows outside this
        run's partition come from the version before the failed commits instead."""
        path = table_path(self.lake, name)
        newest = next(iter(commit_versions(self.spark, path)), None)
        if newest is None:
            return None
        writer = run_of(commit_metadata(self.spark, path, newest))
        if writer is None or writer == self.run_id:
            return None
        if self._runs is not None and writer in self._runs:
            return None  # a successful run's commit: the common case, no run log read
        base, skipped = failed_head(self.spark, path, failed_runs(self.spark, self.lake))
        if not skipped:
            return None
        self.info(
            f"{name}: leaving out version(s) {', '.join(map(str, sorted(skipped)))} of failed "
            f"runs; the rows outside this run's partition come from version {base}"
        )
        rows = conform(df, table(name))
        if base < 0:
            return rows
        kept = read_table(self.spark, self.lake, name, base).where(
            F.expr(f"NOT coalesce(({replace_where}), false)")
        )
        return kept.select(*rows.columns).unionByName(rows)

    def _rows_committed(
        self, name: str, version: int, replace_where: str | None, whole: bool = False
    ) -> int:
        # The writer's own count (Delta's operationMetrics, counted by the write tasks): no
        # second scan of what was just written. No commit of this run: Delta skips an empty
        # one, so nothing was written. ``whole``: the partition was written with the rest of
        # the table (``_over_failed_head``), so its rows are counted.
        info = commit_info(self.spark, table_path(self.lake, name), version)
        if info.get("userMetadata") != tag(self.run_id):
            return 0
        counted = None if whole else (info.get("operationMetrics") or {}).get("numOutputRows")
        if counted is not None:
            return int(counted)
        # no count in the commit: a replace that removed a partition's rows and wrote none
        # (its metrics are empty), or metrics switched off (...history.metricsEnabled=false)
        written = read_table(self.spark, self.lake, name, version)
        return (written.where(replace_where) if replace_where else written).count()

    def write_quarantine(self, df: DataFrame) -> int:
        """Replace this job's partition of the quarantine table with ``df``."""
        return self.write(
            df.withColumn("stage", F.lit(self.job)),
            "quarantine",
            replace_where=f"stage = '{self.job}'",
        )

    # -- counters and logging ---------------------------------------------------------------
    def count(self, key: str, value: int) -> None:
        self.metrics[key] = int(value)

    def info(self, message: str) -> None:
        print(f"[{self.job}] {message}", file=sys.stderr, flush=True)

    def report(self) -> None:
        for key in sorted(self.metrics):
            self.info(f"{key:>40s} {self.metrics[key]:>12,d}")

    # -- run log ------------------------------------------------------------------------------
    def __enter__(self) -> JobRun:
        if self._given_id:
            self._refuse_a_used_run_id()
        self.info(f"run {self.run_id} on lake {self.lake}")
        return self

    def _refuse_a_used_run_id(self) -> None:
        """A run id names one run: readers publish or hide a commit by its run's status, so a
        second run under a recorded id (a rerun after a failure) would publish the first
        one's commits as its own. Refused before anything is written or recorded."""
        if not table_exists(self.spark, table_path(self.lake, "meta/job_runs")):
            return
        used = (
            read_table(self.spark, self.lake, "meta/job_runs")
            .where(F.col("run_id") == self.run_id)
            .select("job", "status")
            .first()
        )
        if used is not None:
            raise ValueError(
                f"{self.job}: run id {self.run_id} is already in {self.lake}/meta/job_runs "
                f"(a {used['job']} run that {used['status']}): a run id names one run; pass "
                "another --run-id or leave it out for a generated one"
            )

    def __exit__(self, exc_type, exc, tb) -> None:
        status = "succeeded" if exc is None else "failed"
        row = {
            "run_id": self.run_id,
            "job": self.job,
            "status": status,
            "args_json": json.dumps(self.args, sort_keys=True, default=str),
            "inputs": self.inputs,
            "outputs": self.outputs,
            "metrics": self.metrics,
            "error": None if exc is None else f"{exc_type.__name__}: {exc}"[:4000],
            "started_at": self.started_at,
            "finished_at": datetime.now(UTC),
        }
        spec = table("meta/job_runs")
        path = table_path(self.lake, spec.name)
        if isinstance(exc, NoLakeError):
            # recording it would create a lake folder (under a mistyped --lake) only to hold
            # that record; a failed ingest into a new lake is still recorded
            self.info(f"could not record the failed run: no lake at {self.lake}")
        else:
            try:
                ensure_table(self.spark, path, spec)
                frame = self.spark.createDataFrame([row], spec.spark_schema())
                retry_conflicts(
                    lambda: frame.write.format("delta").mode("append").save(path),
                    "record the run",
                )
            except Exception as log_exc:  # never hide the job's own error behind the log's
                if exc is None:
                    raise
                self.info(f"could not record the failed run: {log_exc}")
        self.report()
        self.info(f"{status}")
        # The last stdout line is the task's XCom under Airflow: ids and versions, never data.
        print(
            json.dumps(
                {
                    "job": self.job,
                    "run_id": self.run_id,
                    "status": status,
                    "inputs": self.inputs,
                    "outputs": self.outputs,
                },
                sort_keys=True,
            ),
            flush=True,
        )

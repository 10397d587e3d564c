"""Delta Lake I/O with the table contracts of ``schemas``, and the per-run record.

Every job opens a ``JobRun``: it reads tables at a pinned version, writes through the table
contract (schema enforcement, idempotent overwrite or partition replace), counts its steps
and, at the end, appends one row to ``meta/job_runs`` with the Delta versions it read and
wrote and its counters.
"""

from __future__ import annotations

import json
import logging
import sys
import uuid
from datetime import UTC, datetime

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from schemas import TableSpec, table

log = logging.getLogger("xembed")


def table_path(lake: str, name: str) -> str:
    return f"{lake.rstrip('/')}/{name}"


def conform(df: DataFrame, spec: TableSpec) -> DataFrame:
    """Select ``spec``'s columns in order, cast to the declared types; fail on any mismatch."""
    missing = [c for c in spec.column_names if c not in df.columns]
    extra = [c for c in df.columns if c not in spec.column_names]
    if missing or extra:
        raise ValueError(
            f"table {spec.name}: columns do not match the contract "
            f"(missing {missing or 'none'}, unexpected {extra or 'none'})"
        )
    schema = spec.spark_schema()
    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def ensure_table(spark: SparkSession, path: str, spec: TableSpec) -> None:
    """Create the Delta table with the contract's schema, partitioning and comments if absent."""
    from delta.tables import DeltaTable

    builder = (
        DeltaTable.createIfNotExists(spark)
        .location(path)
        .addColumns(spec.spark_schema())
        .comment(spec.description)
    )
    if spec.partition_by:
        builder = builder.partitionedBy(*spec.partition_by)
    builder.execute()


def latest_version(spark: SparkSession, path: str) -> int:
    from delta.tables import DeltaTable

    return int(DeltaTable.forPath(spark, path).history(1).select("version").first()[0])


def table_exists(spark: SparkSession, path: str) -> bool:
    from delta.tables import DeltaTable

    return DeltaTable.isDeltaTable(spark, path)


def write_table(
    spark: SparkSession, df: DataFrame, lake: str, name: str, replace_where: str | None = None
) -> int:
    """Overwrite table ``name`` (or the rows matching ``replace_where``); returns the new version.

    Overwrite keeps reruns idempotent: the same input gives the same table, never duplicates.
    """
    spec = table(name)
    path = table_path(lake, name)
    ensure_table(spark, path, spec)
    writer = conform(df, spec).write.format("delta").mode("overwrite")
    if replace_where:
        writer = writer.option("replaceWhere", replace_where)
    writer.save(path)
    return latest_version(spark, path)


class JobRun:
    """Context of one job run: pinned reads, contract writes, counters, run log row."""

    def __init__(
        self,
        spark: SparkSession,
        lake: str,
        job: str,
        args: dict | None = None,
        run_id: str | None = None,
    ):
        self.spark = spark
        self.lake = lake
        self.job = job
        self.args = args or {}
        self.run_id = run_id or f"{job}-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:6]}"
        self.inputs: dict[str, int] = {}
        self.outputs: dict[str, int] = {}
        self.metrics: dict[str, int] = {}
        self.started_at = datetime.now(UTC)

    # -- I/O ------------------------------------------------------------------------------
    def read(self, name: str) -> DataFrame:
        """Read table ``name`` at its current version and record that version as an input.

        Reading back a table this run wrote pins the written version and is not an input.
        """
        path = table_path(self.lake, name)
        if not table_exists(self.spark, path):
            raise FileNotFoundError(
                f"{self.job}: input table {name} does not exist at {path}; "
                "run the job that writes it first"
            )
        version = latest_version(self.spark, path)
        if name not in self.outputs:
            self.inputs[name] = version
        return self.spark.read.format("delta").option("versionAsOf", version).load(path)

    def write(self, df: DataFrame, name: str, replace_where: str | None = None) -> int:
        version = write_table(self.spark, df, self.lake, name, replace_where)
        self.outputs[name] = version
        self.info(f"wrote {name} (version {version})")
        return version

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
        self.info(f"run {self.run_id} on lake {self.lake}")
        return self

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
        try:
            ensure_table(self.spark, path, spec)
            frame = self.spark.createDataFrame([row], spec.spark_schema())
            frame.write.format("delta").mode("append").save(path)
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

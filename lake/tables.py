"""Delta tables under a lake root (any Spark URI), read and written through their contracts.

``table_path`` is the one place a table's location is computed; ``write_table`` enforces the
contract of ``schemas`` (columns, types, partitioning) and keeps reruns idempotent.
"""

from __future__ import annotations

import json
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegralType,
    MapType,
    StructType,
)

from lake import fs
from lake.session import build_session
from schemas import TableSpec, table


def table_path(lake: str, name: str) -> str:
    """``<lake>/<name>`` for a registered table; the lake may be a path or any Spark URI."""
    table(name)  # unknown names fail here, with the list of known ones
    return join(lake, name)


def join(root: str, *parts: str) -> str:
    """``root/part/...`` for a local path or a URI (``file://``, ``s3a://``, ``hdfs://``).

    ``file:///x`` becomes ``file:/x``, the form Hadoop qualifies local paths to: Delta compares
    table locations as strings and refuses the same table under two spellings.
    """
    if root.startswith("file:///"):
        root = "file:/" + root.removeprefix("file:///")
    return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts)])


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
    given = {f.name: f.dataType for f in df.schema.fields}
    for f in schema.fields:
        if problem := _lossy_cast(given[f.name], f.dataType, f.name):
            raise ValueError(
                f"table {spec.name}: {problem}; the contract: {f.dataType.simpleString()}"
            )
    return df.select([F.col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])


def _lossy_cast(source: DataType, target: DataType, where: str) -> str | None:
    """Why casting ``source`` to ``target`` would change values without an error, or None:
    Spark casts structs by field position (two fields in another order swap their values),
    fractional numbers to integers by truncation, and a struct, array or map to a string."""
    complex_types = (StructType, ArrayType, MapType)
    if isinstance(source, StructType) and isinstance(target, StructType):
        names, wanted = source.fieldNames(), target.fieldNames()
        if names != wanted:
            return (
                f"{where} has the struct fields {names}, in the contract's order they are {wanted}"
            )
        for a, b in zip(source.fields, target.fields, strict=True):
            if problem := _lossy_cast(a.dataType, b.dataType, f"{where}.{a.name}"):
                return problem
        return None
    if isinstance(source, ArrayType) and isinstance(target, ArrayType):
        return _lossy_cast(source.elementType, target.elementType, f"{where}[]")
    if isinstance(source, MapType) and isinstance(target, MapType):
        return _lossy_cast(source.keyType, target.keyType, f"{where} keys") or _lossy_cast(
            source.valueType, target.valueType, f"{where} values"
        )
    if isinstance(source, complex_types) and not isinstance(target, type(source)):
        return f"{where} is {source.simpleString()}"
    fractional = isinstance(source, (FloatType, DoubleType)) or (
        isinstance(source, DecimalType) and source.scale > 0
    )
    if fractional and isinstance(target, IntegralType):
        return f"{where} is {source.simpleString()} (a cast would truncate it)"
    return None


T = TypeVar("T")

#: Attempts of one commit that lost a race to another writer's commit (see ``retry_conflicts``).
COMMIT_ATTEMPTS = 5


#: Delta's optimistic-concurrency failures (delta.exceptions): the commit lost a race.
CONFLICTS = (
    "ConcurrentAppendException",
    "ConcurrentDeleteDeleteException",
    "ConcurrentDeleteReadException",
    "ConcurrentTransactionException",
    "ConcurrentWriteException",
    "DeltaConcurrentModificationException",
    "MetadataChangedException",
    "ProtocolChangedException",
)


# the error conditions of those exceptions (Delta's error/delta-error-classes.json)
CONFLICT_CONDITIONS = (
    "DELTA_CONCURRENT_",
    "DELTA_METADATA_CHANGED",
    "DELTA_PROTOCOL_CHANGED",
)


def _conflicts() -> tuple[type[BaseException], ...]:
    import delta.exceptions

    return tuple(getattr(delta.exceptions, name) for name in CONFLICTS)


def is_conflict(error: BaseException) -> bool:
    """A lost optimistic-concurrency race: delta's exception classes on a classic session; on
    a Spark Connect session (which raises Spark's generic errors) Delta's error condition."""
    if isinstance(error, _conflicts()):
        return True
    condition = getattr(error, "getCondition", lambda: None)() or ""
    return condition.startswith(CONFLICT_CONDITIONS)


def retry_conflicts(action: Callable[[], T], what: str, attempts: int = COMMIT_ATTEMPTS) -> T:
    """Run ``action`` (one Delta commit), again after a short random wait when it lost an
    optimistic-concurrency race; other errors, and the last conflict, propagate.

    Every commit of ours replaces a whole table or partition (or blindly appends a run row),
    so repeating it after another writer's commit is what a rerun would do: the later commit
    wins, and ``lake.snapshots`` decides what readers may see.
    """
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as conflict:
            if attempt == attempts or not is_conflict(conflict):
                raise
            print(
                f"[lake] {what}: commit conflict ({type(conflict).__name__}); "
                f"retry {attempt}/{attempts - 1}",
                file=sys.stderr,
                flush=True,
            )
            _back_off(attempt)
    raise AssertionError("unreachable")


def _back_off(attempt: int) -> None:
    """A random pause growing with the attempt, so two racing writers fall out of step."""
    time.sleep(random.uniform(0.2, 1.0) * attempt)


def ensure_table(
    spark: SparkSession, path: str, spec: TableSpec, user_metadata: str | None = None
) -> None:
    """Create the Delta table with the contract's schema, partitioning and comments if absent;
    ``user_metadata`` goes into the creating commit (a job run's tag: the empty table it
    creates is its output like its writes, invisible when the run fails).

    Two writers creating one table at once: the loser's create fails in several ways (a
    conflict, or "table not found" while the winner's first commit lands); it tries again
    until the table exists.
    """
    if table_exists(spark, path):  # a listing; the SQL below resolves the table's snapshot
        return
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        try:
            with commit_metadata_of(spark, user_metadata):
                _create_if_absent(spark, path, spec)
            return
        except Exception:
            if table_exists(spark, path):
                return
            if attempt == COMMIT_ATTEMPTS:
                raise
            _back_off(attempt)  # the winner's commit is landing


#: The session setting that puts user metadata into every Delta commit, SQL commands' too
#: (CREATE TABLE, RESTORE), which take no writer option.
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"


@contextmanager
def commit_metadata_of(spark: SparkSession, user_metadata: str | None):
    """Tag the commits made inside the block with ``user_metadata`` (nothing when None)."""
    if user_metadata is None:
        yield
        return
    before = spark.conf.get(USER_METADATA_CONF, None)
    spark.conf.set(USER_METADATA_CONF, user_metadata)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(USER_METADATA_CONF)
        else:
            spark.conf.set(USER_METADATA_CONF, before)


def delta_ref(path: str) -> str:
    """``delta.`<path>```: a table by its location in SQL (a backtick in the path doubled)."""
    return "delta.`{}`".format(path.replace("`", "``"))


def sql_string(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'{}'".format(text.replace("\\", "\\\\").replace("'", "\\'"))


#: Properties of every table the lake creates. Delta keeps min/max statistics of the first 32
#: columns of every file it writes, for data skipping; computing them took about as long as
#: the write itself with code generation, 3-6x with the short-job JVM options of `make test`
#: and `make demo` (silver/claims at 30,000 patents: 12.3 s against 2.2 s without;
#: docs/SCALING.md). Our readers take whole tables or partitions (partition pruning needs no
#: statistics), and the keys are spread over every file, so min/max would skip nothing. Each
#: file still records its row count. A table clustered for selective reads can name its own
#: columns:
#: ``ALTER TABLE delta.`<path>` SET TBLPROPERTIES ('delta.dataSkippingStatsColumns' = ...)``.
TABLE_PROPERTIES = {"delta.dataSkippingNumIndexedCols": "0"}


def _create_if_absent(spark: SparkSession, path: str, spec: TableSpec) -> None:
    # SQL rather than delta.tables.DeltaTable: it runs on a Spark Connect session as well
    columns = spec.spark_schema().toDDL()
    partitions = ", ".join(f"`{c}`" for c in spec.partition_by)
    properties = ", ".join(
        f"{sql_string(k)} = {sql_string(v)}" for k, v in TABLE_PROPERTIES.items()
    )
    spark.sql(
        f"CREATE TABLE IF NOT EXISTS {delta_ref(path)} ({columns}) USING delta"
        + (f" PARTITIONED BY ({partitions})" if partitions else "")
        + f" COMMENT {sql_string(spec.description)}"
        + f" TBLPROPERTIES ({properties})"
    )


#: A commit file of a Delta log: ``<version, 20 digits>.json`` (Delta's PROTOCOL.md).
_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")


def commit_versions(spark: SparkSession, path: str) -> list[int]:
    """The versions whose commit files the table's log holds, newest first."""
    names = fs.list_names(spark, join(path, "_delta_log"))
    return sorted((int(m[1]) for n in names if (m := _COMMIT_FILE.match(n))), reverse=True)


def commit_info(spark: SparkSession, path: str, version: int) -> dict:
    """The ``commitInfo`` action of commit ``version`` ({} when the commit has none)."""
    text = fs.read_text(spark, join(path, "_delta_log", f"{version:020d}.json"))
    for line in text.splitlines():
        if '"commitInfo"' in line:
            return json.loads(line)["commitInfo"]
    return {}


def commit_metadata(spark: SparkSession, path: str, version: int) -> str | None:
    """The ``userMetadata`` of commit ``version``, or None."""
    return commit_info(spark, path, version).get("userMetadata")


def commits(spark: SparkSession, path: str) -> Iterator[tuple[int, str | None]]:
    """``(version, userMetadata)`` of the table's commits, newest first, read lazily from its
    log files: what ``DESCRIBE HISTORY`` reports, without its query and Spark job (~0.2 s on
    a warm local driver), for the one or two newest commits a reader asks about."""
    for version in commit_versions(spark, path):
        yield version, commit_metadata(spark, path, version)


def latest_version(spark: SparkSession, path: str, user_metadata: str | None = None) -> int:
    """The table's newest version, or the newest commit carrying ``user_metadata`` (a writer's
    own commit, even when another writer committed right after it; the newest version when
    the writer's commit was empty and Delta skipped it)."""
    versions = commit_versions(spark, path)
    if not versions:
        raise FileNotFoundError(f"no commit in the Delta log of {path}")
    if user_metadata is not None:
        for version in versions[:50]:
            if commit_metadata(spark, path, version) == user_metadata:
                return version
    # no commit of ours: Delta records no empty commit (an empty partition replaced by nothing)
    return versions[0]


def restore(spark: SparkSession, path: str, version: int, user_metadata: str | None = None) -> None:
    """Make ``version`` the table's current state again (a new commit, tagged with
    ``user_metadata``)."""
    with commit_metadata_of(spark, user_metadata):
        spark.sql(f"RESTORE TABLE {delta_ref(path)} TO VERSION AS OF {int(version)}")


def table_exists(spark: SparkSession, path: str) -> bool:
    """Whether ``path`` is the root of a Delta table (its log holds a commit or checkpoint)."""
    names = fs.list_names(spark, join(path, "_delta_log"))
    return any(n.endswith(".json") or ".checkpoint" in n for n in names)


def write_table(
    spark: SparkSession,
    df: DataFrame,
    lake: str,
    name: str,
    replace_where: str | None = None,
    user_metadata: str | None = None,
) -> int:
    """Overwrite table ``name`` (or the rows matching ``replace_where``); returns the new version.

    Overwrite keeps reruns idempotent: the same input gives the same table, never duplicates.
    ``user_metadata`` goes into the commit (job runs tag their commits, see lake.snapshots),
    and into the table's creating commit when this write creates it.
    """
    spec = table(name)
    path = table_path(lake, name)
    ensure_table(spark, path, spec, user_metadata)
    # mergeSchema: a table written before its contract gained a column takes the new column
    writer = conform(df, spec).write.format("delta").mode("overwrite").option("mergeSchema", "true")
    if replace_where:
        writer = writer.option("replaceWhere", replace_where)
    if user_metadata:
        writer = writer.option("userMetadata", user_metadata)
    retry_conflicts(lambda: writer.save(path), f"write {name}")
    return latest_version(spark, path, user_metadata)


def read_table(spark: SparkSession, lake: str, name: str, version: int | None = None) -> DataFrame:
    """Table ``name`` at ``version`` (default: the latest); a clear error when it is missing."""
    path = table_path(lake, name)
    if not table_exists(spark, path):
        raise FileNotFoundError(
            f"table {name} does not exist at {path}; run the job that writes it first"
        )
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return reader.load(path)


def write_rows(
    spark: SparkSession, rows: list[dict], lake: str, name: str, replace_where: str | None = None
) -> int:
    """Write Python rows (dicts) to table ``name`` through its contract; returns the new version.

    A key the contract does not have, or a NOT NULL column's key missing, is refused by name:
    taken by field name, a misspelled key would have been dropped and its column left null."""
    spec = table(name)
    known = set(spec.column_names)
    required = {c.name for c in spec.columns if not c.nullable}
    for i, row in enumerate(rows):
        if unknown := sorted(set(row) - known):
            raise ValueError(f"{name}: row {i} has column(s) {unknown} the contract lacks")
        if missing := sorted(required - set(row)):
            raise ValueError(f"{name}: row {i} lacks NOT NULL column(s) {missing}")
    frame = spark.createDataFrame(rows, spec.spark_schema())
    return write_table(spark, frame, lake, name, replace_where)


def read_pandas(lake: str, name: str, spark: SparkSession | None = None):
    """Table ``name`` as a pandas DataFrame (latest version) through Spark, the lake's one
    reader for every URI; an empty frame with the contract's columns if it was never written."""
    import pandas as pd

    spark = spark or build_session(f"xembed-read-{name.replace('/', '-')}")
    if not table_exists(spark, table_path(lake, name)):
        return pd.DataFrame(columns=table(name).column_names)
    return read_table(spark, lake, name).toPandas()

"""The one Spark session factory and the command-line flags every lake command shares."""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
from datetime import date
from functools import partial

from pyspark import SparkConf
from pyspark.sql import SparkSession

from lake.cli import flag_check
from schemas.defaults import IPC_SECTIONS, check_label

DEFAULT_LAKE = os.environ.get("XEMBED_LAKE", "./data/lake")
if os.environ.get("SPARK_REMOTE"):
    # pyspark decides when a UDF is defined (module import, before any session exists)
    # whether it is a Spark Connect UDF; with a remote server every one must be
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"

_DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}
# Defaults for every run unless spark-submit --conf / spark-defaults.conf say otherwise.
_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.databricks.delta.schema.autoMerge.enabled": "false",
}
# Extra defaults for local[*] runs on a laptop or CI machine.
_LOCAL_DEFAULTS = {
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.driver.memory": "4g",
    # Delta replays its log with this many tasks; 50 (the default) swamps a laptop.
    "spark.databricks.delta.snapshotPartitions": "2",
    # On one machine adaptive execution re-plans after every shuffle for nothing: a warm
    # driver runs ingest -> curate -> split -> build_pairs -> build_triplets on 300 patents
    # 13% quicker without it (build_triplets, ~15 joins, 25%), and at 100,000 patents
    # ingest + curate and build_pairs take the same time either way; the end-to-end DAG conf
    # on a local[2] server 418 s against 430 and 431 s with it, interleaved (docs/SCALING.md).
    # Clusters keep it (skewed joins, partition coalescing).
    "spark.sql.adaptive.enabled": "false",
    # The lake's tables are paths, never catalog tables, but the first `delta.`path`` statement
    # creates the default database's folder: `./spark-warehouse` under whichever directory the
    # driver started in (a user's work folder, the checkout). One folder per user instead.
    "spark.sql.warehouse.dir": os.path.join(
        tempfile.gettempdir(), f"xembed-warehouse-{os.getuid()}"
    ),
}


def _defaults(master: str) -> dict[str, str]:
    return {**_DEFAULTS, **(_LOCAL_DEFAULTS if master.startswith("local") else {})}


def server_conf(master: str) -> dict[str, str]:
    """The configuration a driver serving many jobs starts with (``lake.connect``)."""
    return {**_DELTA_CONF, **_defaults(master)}


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect client session (no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def build_session(
    app_name: str, master: str | None = None, conf: dict | None = None
) -> SparkSession:
    """A SparkSession with Delta Lake enabled.

    The master comes from, in order: ``master``, spark-submit (``--master``), ``$XEMBED_SPARK_MASTER``,
    else ``local[*]``. The Delta jars must be on the classpath: ``make setup`` puts them into
    pyspark's jars; on a cluster pass ``--packages`` (see README).

    With ``$SPARK_REMOTE`` set (``sc://host:port``, a server of ``python -m lake.connect``) the
    session is a Spark Connect client of that server's driver instead, and ``master`` is the
    server's business.
    """
    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        return _connect(app_name, remote, conf)
    existing = SparkConf()  # under spark-submit this holds its --master and --conf values
    builder = SparkSession.builder.appName(app_name)
    chosen = master or existing.get("spark.master", None) or os.environ.get("XEMBED_SPARK_MASTER")
    chosen = chosen or "local[*]"
    builder = builder.master(chosen)
    if chosen.startswith("local"):
        # Python workers must use this interpreter (the venv), not whatever python3 is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in _defaults(chosen).items():
        if existing.get(key, None) is None:
            builder = builder.config(key, value)
    for key, value in {**_DELTA_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(os.environ.get("XEMBED_SPARK_LOG_LEVEL", "WARN"))
    _check_delta(spark)
    return spark


def _connect(app_name: str, remote: str, conf: dict | None) -> SparkSession:
    # a new session starts from the server's configuration (``server_conf``): Delta, UTC, ...
    spark = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
    for key, value in (conf or {}).items():
        spark.conf.set(key, value)  # SQL settings only: the driver is already running
    return spark


def parallelism(spark: SparkSession) -> int:
    """The driver's default parallelism (a Spark Connect client asks the server's conf)."""
    if not is_connect(spark):
        return spark.sparkContext.defaultParallelism
    declared = spark.conf.get("spark.default.parallelism", None)
    if declared:
        return int(declared)
    master = spark.conf.get("spark.master", None) or ""
    if master == "local":
        return 1
    if master.startswith("local["):
        cores = master.removeprefix("local[").split(",")[0].rstrip("]")
        return int(cores) if cores.isdigit() else os.cpu_count() or 1
    # a cluster's executors are unknown to a client: its shuffle width stands in
    return int(spark.conf.get("spark.sql.shuffle.partitions"))


def _check_delta(spark: SparkSession) -> None:
    jvm = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName("io.delta.tables.DeltaTable")
    except Exception as exc:  # py4j wraps ClassNotFoundException
        # `import lake` must not import lake.jars, or `python -m lake.jars` (make setup) warns
        # that the module was imported before it ran: deferred to this error path
        from lake.jars import maven_coordinates

        raise RuntimeError(
            "delta-spark jars are not on Spark's classpath. Run `make setup` for local runs, "
            f"or pass --packages {maven_coordinates()} to spark-submit on a cluster."
        ) from exc


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (the error names the value)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


#: argparse type: a run id, name or id (``schemas.defaults.LABEL_PATTERN``)
label = flag_check(partial(check_label, what="label"))


def iso_date(text: str) -> date:
    """argparse type: a calendar date written YYYY-MM-DD (the error names the value).

    >>> iso_date("2025-01-01")
    datetime.date(2025, 1, 1)
    >>> iso_date("2025-13-01")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a date YYYY-MM-DD, got '2025-13-01'
    """
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text.strip()):
            return date.fromisoformat(text.strip())
    except ValueError:
        pass
    raise argparse.ArgumentTypeError(f"expected a date YYYY-MM-DD, got {text!r}")


def landscape(text: str) -> tuple[str, ...]:
    """argparse type: a landscape, i.e. IPC section letters ``A,B,C`` (sorted, each once);
    an empty string is no landscape."""
    sections = sorted({s.strip().upper() for s in text.split(",") if s.strip()})
    bad = [s for s in sections if s not in IPC_SECTIONS]
    if bad:
        raise argparse.ArgumentTypeError(f"{bad} are not IPC sections (A-H)")
    return tuple(sections)


def add_landscape_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument(
        "--landscape",
        type=landscape,
        default=(),
        help=f"IPC sections, e.g. G,H: {what} (default: none, every section)",
    )


def job_arguments(description: str) -> argparse.ArgumentParser:
    """An argument parser with the flags every job shares (kebab-case)."""
    parser = argparse.ArgumentParser(description=description, allow_abbrev=False)
    add_lake_arguments(parser)
    parser.add_argument(
        "--run-id",
        type=label,
        default=None,
        help="run id recorded in meta/job_runs (letters, digits and . _ + = @ -; default: "
        "generated)",
    )
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="allow an empty input table or an empty output (default: fail, write nothing)",
    )
    return parser


def path_or_uri(text: str) -> str:
    """argparse type of ``--lake`` and the other folders Spark reads or writes: a URI as
    given, a local path made absolute (from the working directory of the command).

    Delta reads a relative location in SQL (``delta.`data/lake/bronze/publications` ``) as
    table ``data/lake/...`` of a schema named ``delta`` (the first write failed on "schema
    `spark_catalog`.`delta` cannot be found"), and a Spark Connect server and its Python
    workers resolve a relative path against their own working directories, not the caller's.

    >>> path_or_uri("s3a://bucket/lake"), path_or_uri("file:/srv/lake"), path_or_uri("/srv/x/")
    ('s3a://bucket/lake', 'file:/srv/lake', '/srv/x')
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no folder")
    if text.startswith("file:") or "://" in text:
        return text
    return os.path.abspath(os.path.expanduser(text))


def add_lake_arguments(parser: argparse.ArgumentParser) -> None:
    """``--lake`` and ``--master`` for any command that reads or writes the lake."""
    parser.add_argument(
        "--lake",
        type=path_or_uri,
        default=DEFAULT_LAKE,
        help="lake root: a local path or any Spark URI (file://, s3a://, hdfs://, ...); "
        "default $XEMBED_LAKE, else ./data/lake",
    )
    parser.add_argument(
        "--master",
        default=None,
        help="Spark master; default: spark-submit's, else $XEMBED_SPARK_MASTER, else local[*]",
    )

"""The lake layer: Spark sessions with Delta, table paths, contract-enforcing reads and writes,
the per-run record and file-system helpers for any Spark URI.

Every package that touches the lake goes through here (``spark_jobs``, ``evaluation``,
``trainer``'s registry, ``expectations``); it imports only ``schemas``. Import cost stays low:
pyspark is imported by the modules below, not by this file's callers' callers.
"""

from lake import fs
from lake.runs import EmptyTableError, JobRun
from lake.session import (
    add_lake_arguments,
    add_landscape_argument,
    build_session,
    iso_date,
    job_arguments,
    label,
    landscape,
    path_or_uri,
    positive_int,
)
from lake.snapshots import MixedLakeError, visible_versions
from lake.tables import (
    conform,
    ensure_table,
    join,
    latest_version,
    read_pandas,
    read_table,
    table_exists,
    table_path,
    write_rows,
    write_table,
)

__all__ = [
    "EmptyTableError",
    "JobRun",
    "MixedLakeError",
    "add_lake_arguments",
    "add_landscape_argument",
    "build_session",
    "conform",
    "ensure_table",
    "fs",
    "iso_date",
    "job_arguments",
    "join",
    "label",
    "landscape",
    "latest_version",
    "path_or_uri",
    "positive_int",
    "read_pandas",
    "read_table",
    "table_exists",
    "table_path",
    "visible_versions",
    "write_rows",
    "write_table",
]

"""Query the lake's Delta tables by name with spark-sql.

    python -m spark_jobs.sql --lake data/lake                      # interactive spark-sql shell
    python -m spark_jobs.sql --lake data/lake -e "SELECT * FROM eval_metrics LIMIT 5"

Every table under the lake root is registered as a temporary view named after its path
(eval/metrics -> eval_metrics, silver/patents -> silver_patents), at the version a job would
read: the newest one a successful run published (README "Reliability"), so the rows of a
failed or killed run are not shown; the versions left out are named on stderr. Nothing is
written to a metastore.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lake import build_session, fs
from lake.session import DEFAULT_LAKE, path_or_uri
from lake.snapshots import succeeded_runs, visible
from lake.tables import delta_ref, table_exists, table_path
from schemas import TABLES


def view_name(table: str) -> str:
    return table.replace("/", "_")


def init_sql(lake: str, versions: dict[str, int]) -> str:
    """CREATE TEMPORARY VIEW statements for the tables of ``versions`` (name -> version).

    >>> print(init_sql("s3a://b/lake", {"eval/metrics": 4}), end="")
    CREATE TEMPORARY VIEW eval_metrics AS SELECT * FROM delta.`s3a://b/lake/eval/metrics` VERSION AS OF 4;
    >>> print(init_sql("file:/srv/team`s lake", {"eval/metrics": 4}), end="")
    CREATE TEMPORARY VIEW eval_metrics AS SELECT * FROM delta.`file:/srv/team``s lake/eval/metrics` VERSION AS OF 4;
    """
    # a URI as given (file:/srv/lake too), a local path made absolute
    root = lake if "://" in lake or lake.startswith("file:") else str(Path(lake).resolve())
    lines = [
        f"CREATE TEMPORARY VIEW {view_name(name)} AS SELECT * FROM {delta_ref(f'{root}/{name}')} "
        f"VERSION AS OF {version};"
        for name, version in versions.items()
    ]
    return "\n".join(lines) + "\n"


def published_versions(spark, lake: str) -> dict[str, int]:
    """The version of each existing lake table that a job would read (what successful runs
    published); what is left out is said on stderr."""
    runs = succeeded_runs(spark, lake)
    versions = {}
    for name in TABLES:
        if not table_exists(spark, table_path(lake, name)):
            continue
        try:
            snapshot = visible(spark, lake, name, runs)
        except FileNotFoundError as only_failed:
            print(f"sql: {view_name(name)} not registered: {only_failed}", file=sys.stderr)
            continue
        versions[name] = snapshot.version
        if snapshot.hidden:
            print(
                f"sql: {view_name(name)} shows version {snapshot.version}, not "
                f"{', '.join(map(str, sorted(snapshot.hidden)))} (written by runs that did not "
                "succeed)",
                file=sys.stderr,
            )
    return versions


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--lake",
        type=path_or_uri,
        default=DEFAULT_LAKE,  # the jobs' default: a bare `sql` opens the lake they wrote
        help="lake root: a local path or any Spark URI; default $XEMBED_LAKE, else ./data/lake",
    )
    parser.add_argument("-e", dest="query", default=None, help="run one query and exit")
    parser.add_argument("-f", dest="file", default=None, help="run a SQL file and exit")
    args = parser.parse_args(argv)
    if problem := fs.no_lake_folder(args.lake):
        print(f"sql: {problem}", file=sys.stderr)
        return 2
    spark_sql = shutil.which("spark-sql") or str(Path(sys.executable).parent / "spark-sql")
    with tempfile.TemporaryDirectory(prefix="xembed-sql-") as tmp:
        init = Path(tmp) / "init.sql"
        spark = build_session("xembed-sql", "local[1]")
        try:
            versions = published_versions(spark, args.lake)
        finally:
            spark.stop()
        if not versions:  # a typo in --lake would open a shell where every table is "not found"
            print(
                f"sql: no lake table under {args.lake} (--lake names the lake root, the folder "
                "holding bronze/, silver/, gold/, eval/)",
                file=sys.stderr,
            )
            return 2
        init.write_text(init_sql(args.lake, versions))
        cmd = [
            spark_sql,
            "--master",
            "local[2]",
            "--conf",
            "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension",
            "--conf",
            "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog",
            "--conf",
            f"spark.sql.warehouse.dir={tmp}/warehouse",
            "--conf",
            f"spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={tmp}/metastore;create=true",
            "--conf",
            "spark.ui.enabled=false",
            "-i",
            str(init),
        ]
        if args.query:
            cmd += ["-e", args.query]
        elif args.file:
            cmd += ["-f", os.path.abspath(args.file)]  # spark-sql runs in a scratch folder
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        return subprocess.run(cmd, env=env, cwd=tmp).returncode


if __name__ == "__main__":
    sys.exit(main())

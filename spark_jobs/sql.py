"""Query the lake's Delta tables by name with spark-sql.

    python -m spark_jobs.sql --lake data/lake                      # interactive spark-sql shell
    python -m spark_jobs.sql --lake data/lake -e "SELECT * FROM eval_metrics LIMIT 5"

Every table under the lake root is registered as a temporary view named after its path
(eval/metrics -> eval_metrics, silver/patents -> silver_patents); nothing is written to a
metastore.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from schemas import TABLES


def view_name(table: str) -> str:
    return table.replace("/", "_")


def init_sql(lake: str) -> str:
    """CREATE TEMPORARY VIEW statements for the tables that exist under ``lake``."""
    root = lake if "://" in lake else str(Path(lake).resolve())
    lines = []
    for name in TABLES:
        if "://" in root or (Path(root) / name / "_delta_log").is_dir():
            lines.append(
                f"CREATE TEMPORARY VIEW {view_name(name)} USING delta OPTIONS (path '{root}/{name}');"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", default="./lake")
    parser.add_argument("-e", dest="query", default=None, help="run one query and exit")
    parser.add_argument("-f", dest="file", default=None, help="run a SQL file and exit")
    args = parser.parse_args(argv)
    spark_sql = shutil.which("spark-sql") or str(Path(sys.executable).parent / "spark-sql")
    with tempfile.TemporaryDirectory(prefix="xembed-sql-") as tmp:
        init = Path(tmp) / "init.sql"
        init.write_text(init_sql(args.lake))
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
            cmd += ["-f", args.file]
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
        return subprocess.run(cmd, env=env, cwd=tmp).returncode


if __name__ == "__main__":
    sys.exit(main())

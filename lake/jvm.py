"""A quicker start for short local Spark runs: a class-data-sharing (CDS) archive.

A local job on tiny data spends much of its time starting a JVM that loads some 15,000
classes (Spark, Delta, Hadoop, Parquet) from jars. ``make setup`` runs one small Delta job
under ``-XX:ArchiveClassesAtExit`` and keeps the loaded classes in an archive the JDK maps
into later JVMs instead of loading them again; ``benchmarks/startup.py`` measures the gain.

    python -m lake.jvm archive [--if-missing]  # dump it (once; again after a JDK or jar change)
    python -m lake.jvm options   # JVM options for short local runs (C1 JIT + the archive)

The archive's name holds a hash of the JDK and of the jar list, so an archive made for other
jars or another JDK is never offered; ``-Xshare:auto`` makes a JVM that cannot map it start
normally. ``make demo`` and ``make test`` put ``local_options()`` in ``SPARK_SUBMIT_OPTS``,
which every local driver JVM reads (spark-submit and pyspark alike): the archive, C1-only JIT
(short jobs on tiny data finish before C2 pays off), a 240 MB code cache, and interpreted
projections (``TINY_DATA``). C1-only JIT
alone gets the JDK's non-tiered 48 MB cache, which a driver fills within one ingest + curate;
the JVM then switches its JIT compiler off ("CodeCache is full. Compiler has been disabled")
and every query compiled after that (each test of a pytest worker's session, each later
stage of a demo job) runs interpreted.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from lake.jars import cache_dir, pyspark_jars_dir
from lake.session import build_session

QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
# C1-only JIT with the code cache tiered compilation would have had (240 MB, not 48 MB)
C1_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"
# Interpreted projections and predicates instead of Janino code per task. Spark generates
# (then finds cached) the Java source of every projection in every task; on Delta's log
# replay and statistics (structs of ~50 fields) that text is most of a small job's executor
# time: ingest + curate + split of 300 patents 14% quicker, a 40-row Delta overwrite 17%.
# At 100,000 patents the same setting makes ingest + curate 40% slower: tiny data only.
# Whole-stage code generation, where the rows of real data go, is unaffected.
TINY_DATA = "-Dspark.sql.codegen.factoryMode=NO_CODEGEN"


def java() -> str:
    """The java binary spark-submit starts: $JAVA_HOME's, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    return str(Path(home) / "bin" / "java") if home else (shutil.which("java") or "java")


def archive_path() -> Path:
    """Where the archive for this JDK and this classpath lives (it may not exist)."""
    version = subprocess.run(
        [java(), "-version"], capture_output=True, text=True, check=False
    ).stderr
    jars = sorted(f"{p.name}:{p.stat().st_size}" for p in pyspark_jars_dir().glob("*.jar"))
    key = hashlib.sha1("\n".join([java(), version, *jars]).encode()).hexdigest()[:16]
    return cache_dir().parent / "cds" / f"spark-{key}.jsa"


def cds_options() -> str:
    """JVM options that map the archive, or "" when it has not been dumped for this setup."""
    path = archive_path()
    # quoted: Spark's launcher splits SPARK_SUBMIT_OPTS at blanks ("/home/Jane Doe/...")
    return f"{_quoted(f'-XX:SharedArchiveFile={path}')} {QUIET}" if path.exists() else ""


def local_options() -> str:
    """JVM options for the short local driver runs of the demo and the tests (tiny data)."""
    return f"{C1_JIT} {TINY_DATA} {cds_options()}".strip()


def long_lived_options(caller: str | None = None) -> str:
    """JVM options for a driver that serves many jobs (a Spark Connect server, a test worker's
    session): the full JIT and the archive, with the Spark settings (``-Dspark.*``) of the
    caller's ``SPARK_SUBMIT_OPTS``: `make test` and `make demo` pass theirs on, a DAG run
    started by hand passes none."""
    caller = os.environ.get("SPARK_SUBMIT_OPTS", "") if caller is None else caller
    settings = [o for o in caller.split() if o.startswith("-Dspark.")]
    return " ".join([cds_options(), *settings]).strip()


def scratch_env(env: dict[str, str], folder: Path) -> dict[str, str]:
    """``env`` for a driver JVM whose local files stay in ``folder``: Spark's local directory
    (``SPARK_LOCAL_DIRS``: block manager, shuffle and spill files) and the JVM's temporary
    files (``java.io.tmpdir``: Spark Connect artifacts, native codecs). A JVM that is killed
    runs no shutdown hook; what it leaves is then ``folder``'s owner's to remove, not /tmp's.

    Spark reads ``SPARK_LOCAL_DIRS`` as a comma-separated list, so a folder whose path holds a
    comma is refused rather than split into two:

    >>> scratch_env({}, Path("/runs/a,b/scratch"))
    Traceback (most recent call last):
    ...
    ValueError: Spark's local directory cannot hold a comma (it reads SPARK_LOCAL_DIRS as a comma-separated list): /runs/a,b/scratch
    """
    if "," in str(folder):
        raise ValueError(
            "Spark's local directory cannot hold a comma (it reads SPARK_LOCAL_DIRS as a "
            f"comma-separated list): {folder}"
        )
    option = f"-Djava.io.tmpdir={folder}"
    opts = f"{env.get('SPARK_SUBMIT_OPTS', '')} {_quoted(option)}".strip()
    return {**env, "SPARK_LOCAL_DIRS": str(folder), "SPARK_SUBMIT_OPTS": opts}


def _quoted(option: str) -> str:
    """``option`` as one word of ``SPARK_SUBMIT_OPTS``, which Spark's launcher splits at
    blanks outside double quotes (a backslash escapes the next character).

    >>> _quoted('-Djava.io.tmpdir=/runs/my "best" run')
    '"-Djava.io.tmpdir=/runs/my \\\\"best\\\\" run"'
    """
    return '"{}"'.format(option.replace("\\", "\\\\").replace('"', '\\"'))


def archive() -> Path:
    """Run a small Delta job in a JVM that dumps the classes it loaded at exit."""
    path = archive_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".part")
    partial.unlink(missing_ok=True)
    opts = f"{_quoted(f'-XX:ArchiveClassesAtExit={partial}')} {QUIET}"
    env = {**os.environ, "SPARK_SUBMIT_OPTS": opts}
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="xembed-cds-") as scratch:
        done = subprocess.run(
            ["spark-submit", "--master", "local[2]", __file__, "exercise", scratch],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"the archiving job failed:\n{done.stderr[-3000:]}")
    if not partial.exists():
        raise RuntimeError(f"the JVM wrote no class archive at {partial}")
    partial.replace(path)
    return path


def exercise(scratch: str) -> None:
    """What most jobs do once: Delta writes (overwrite, replaceWhere, append), reads of a
    version, history, a join and an aggregation, a Python UDF and a collect."""
    from pyspark.sql import functions as F

    spark = build_session("xembed-cds")
    path = f"{scratch}/table"
    frame = spark.range(200).select(
        F.col("id"), (F.col("id") % 7).alias("group"), F.concat(F.lit("x"), "id").alias("text")
    )
    frame.write.format("delta").partitionBy("group").save(path)
    (
        frame.where("group = 1")
        .write.format("delta")
        .mode("overwrite")
        .option("replaceWhere", "group = 1")
        .save(path)
    )
    frame.limit(3).write.format("delta").mode("append").save(path)

    length = F.udf(len, "long")
    first = spark.read.format("delta").option("versionAsOf", 0).load(path)
    joined = (
        first.join(frame.drop("text"), ["id", "group"]).groupBy("group").agg(F.sum(length("text")))
    )
    joined.collect()
    spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("command", choices=["archive", "options", "exercise"])
    parser.add_argument("scratch", nargs="?", help="(exercise) a scratch folder")
    parser.add_argument(
        "--if-missing", action="store_true", help="(archive) keep an archive already dumped"
    )
    args = parser.parse_args(argv)
    if args.command == "exercise":
        exercise(args.scratch)
    elif args.command == "options":
        print(local_options())
    elif args.if_missing and archive_path().exists():
        print(f"JVM class archive ready: {archive_path()}")
    else:
        print(f"JVM class archive ready: {archive()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

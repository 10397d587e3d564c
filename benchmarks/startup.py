"""Benchmark: the fixed cost of one short Spark job, before and after the start-up work.

A DAG run or a test session starts dozens of local driver JVMs on tiny data; each pays for
loading Spark's classes and warming the JIT before it does any work. This script prepares a
small lake once (generate -> ingest -> curate, not timed), then runs through `spark-submit`,
`--repeats` times under each JVM setting (interleaved, so drift hits all alike):
  empty  a job that starts a Delta-enabled session and stops it (pure fixed cost)
  split  spark_jobs/split.py on that lake (a real short job: pinned reads, two table
         writes, the leakage self-check, the run record)
settings:
  default  no JVM options (a plain spark-submit)
  c1       -XX:TieredStopAtLevel=1 (C1-only JIT; what make demo / make test used before)
  c1+cds   c1 plus the class-data-sharing archive of `python -m lake.jvm archive`
and writes benchmarks/results/startup.json: median seconds per job and setting, and the
ratio before (c1) / after (c1+cds).

    python benchmarks/startup.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, timed, write_result

ROOT = Path(__file__).resolve().parents[1]
EMPTY_JOB = """
from lake import build_session
build_session("xembed-bench-empty").stop()
"""


def settings() -> dict[str, str]:
    from lake import jvm

    cds = jvm.options() or f"-XX:SharedArchiveFile={jvm.archive()} {jvm.QUIET}"
    c1 = "-XX:TieredStopAtLevel=1"
    return {"default": "", "c1": c1, "c1+cds": f"{c1} {cds}"}


def submit(script: str, args: list[str], options: str, master: str) -> float:
    env = {**os.environ, "SPARK_SUBMIT_OPTS": options, "PYSPARK_PYTHON": sys.executable}
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    start = time.perf_counter()
    subprocess.run(
        ["spark-submit", "--master", master, "--driver-memory", "4g", script, *args],
        env=env,
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patents", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--work", default=str(Path(__file__).resolve().parent / "work" / "startup"))
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)

    from lake import build_session
    from spark_jobs import curate, ingest
    from spark_jobs.lib.sample.generate import generate

    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    lake, sample = work / "lake", work / "sample"
    prep: dict[str, float] = {}
    with timed("prepare_lake", prep):
        spark = build_session("xembed-bench-startup", args.master)
        generate(spark, str(sample), args.patents, args.seed, 0.02)
        ingest.run(spark, str(lake), str(sample), "google_patents")
        curate.run(spark, str(lake))
        spark.stop()
    empty = work / "jobs" / "empty_job.py"  # not beside ./lake, which would shadow the package
    empty.parent.mkdir()
    empty.write_text(EMPTY_JOB)
    jobs = {
        "empty": (str(empty), []),
        "split": (
            "spark_jobs/split.py",
            ["--lake", str(lake), "--eval-cutoff", str(date(2025, 1, 1))],
        ),
    }
    options = settings()
    seconds: dict[str, dict[str, list[float]]] = {j: {s: [] for s in options} for j in jobs}
    for repeat in range(args.repeats):
        for job, (script, job_args) in jobs.items():
            for setting, jvm_options in options.items():
                took = submit(script, job_args, jvm_options, args.master)
                seconds[job][setting].append(round(took, 2))
                print(
                    f"[{repeat + 1}/{args.repeats}] {job:6s} {setting:8s} {took:6.1f}s", flush=True
                )
    medians = {j: {s: statistics.median(v) for s, v in by.items()} for j, by in seconds.items()}
    ratios = {
        f"{job}_before_over_after": round(m["c1"] / m["c1+cds"], 2) for job, m in medians.items()
    }
    ratios.update(
        {
            f"{job}_default_over_after": round(m["default"] / m["c1+cds"], 2)
            for job, m in medians.items()
        }
    )
    write_result(
        "startup",
        {
            "machine": machine(args.master),
            "patents": args.patents,
            "repeats": args.repeats,
            "jvm_options": options,
            "seconds_prepare": prep,
            "seconds": seconds,
            "median_seconds": medians,
            **ratios,
        },
        args.out,
    )
    for job, m in medians.items():
        print(
            f"{job}: default {m['default']:.1f}s, c1 (before) {m['c1']:.1f}s, "
            f"c1+cds (after) {m['c1+cds']:.1f}s -> before/after {m['c1'] / m['c1+cds']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
